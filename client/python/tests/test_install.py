"""The documented install: pip into a venv made with --system-site-packages,
without PyPI, from a copy of the repository's client/python, proto and
common/vocabulary (the signal table); the installed package imports from
elsewhere, carries its generated modules and the table in its own folder,
and adds no google/__init__.py."""
import os
import shutil
import subprocess

from conftest import REPO_ROOT


def test_pip_install_into_a_venv_without_pypi(tmp_path):
    tree = tmp_path / "repo"
    shutil.copytree(os.path.join(REPO_ROOT, "client", "python"), tree / "client" / "python",
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "build",
                                                  "*.egg-info"))
    shutil.copytree(os.path.join(REPO_ROOT, "proto"), tree / "proto")
    shutil.copytree(os.path.join(REPO_ROOT, "common", "vocabulary"),
                    tree / "common" / "vocabulary")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--no-deps", "--no-build-isolation",
                    "--no-index", "-q", str(tree / "client" / "python")],
                   check=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=""))
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import os, pydoc, metrics_client, google.protobuf\n"
         "from metrics_client._proto import ingest_pb2\n"
         "print(os.path.dirname(metrics_client.__file__))\n"
         "print(len(pydoc.render_doc(metrics_client.Reporter)))"],
        check=True, capture_output=True, text=True, cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH="")).stdout.split()
    installed = out[0]
    assert installed.startswith(str(venv)), installed
    assert int(out[1]) > 2000  # help(Reporter) has its documentation
    site = os.path.dirname(installed)
    assert not os.path.exists(os.path.join(site, "google", "__init__.py"))
    assert os.path.exists(os.path.join(installed, "_proto", "ingest_pb2_grpc.py"))
    assert os.path.exists(os.path.join(installed, "signals.json"))
