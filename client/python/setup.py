"""Builds metrics_client with its protobuf and gRPC modules generated from
the repository's protos (build_protos.py), so they match the server's, and
the signal vocabulary's table (common/vocabulary/signals.json) beside them."""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithProtos(build_py):
    def run(self):
        super().run()
        subprocess.run([sys.executable, os.path.join(HERE, "build_protos.py"),
                        os.path.join(self.build_lib, "metrics_client", "_proto")],
                       check=True)
        shutil.copy(os.path.join(HERE, "..", "..", "common", "vocabulary", "signals.json"),
                    os.path.join(self.build_lib, "metrics_client", "signals.json"))


setup(cmdclass={"build_py": BuildWithProtos})
