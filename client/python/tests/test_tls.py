"""TLS and mutual TLS as metrics-agent uses them: the Reporter and Client
trust a given CA and present a client certificate; a client that does not
trust the server's certificate or has none never gets through, and says
nothing of its token."""
import subprocess
import time

import grpc
import pytest

from conftest import Metricsd
from metrics_client import Client, MetricsError, Reporter

BASE = 1_790_000_000.0


def openssl(*args):
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def certificate(directory, name, subject, ca=None, ext=None):
    key, pem = str(directory / (name + ".key")), str(directory / (name + ".pem"))
    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
               "-keyout", key, "-subj", subject]
    if ca is None:
        openssl("req", "-x509", "-days", "2", "-out", pem, *new_key)
    else:
        csr, extfile = str(directory / (name + ".csr")), directory / (name + ".ext")
        extfile.write_text(ext + "\n")
        openssl("req", "-out", csr, *new_key)
        openssl("x509", "-req", "-in", csr, "-CA", ca + ".pem", "-CAkey", ca + ".key",
                "-CAcreateserial", "-days", "2", "-out", pem, "-extfile", str(extfile))
    return pem, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca, _ = certificate(d, "ca", "/CN=metrics test CA")
    other_ca, _ = certificate(d, "other-ca", "/CN=another CA")
    server = certificate(d, "server", "/CN=localhost", str(d / "ca"),
                         "subjectAltName=DNS:localhost,IP:127.0.0.1")
    client = certificate(d, "client", "/CN=agent", str(d / "ca"), "extendedKeyUsage=clientAuth")
    return dict(ca=ca, other_ca=other_ca, server=server, client=client)


def test_mutual_tls(pki):
    server = Metricsd(["--tls-cert", pki["server"][0], "--tls-key", pki["server"][1],
                       "--tls-client-ca", pki["ca"]])
    try:
        cert, key = pki["client"]
        with Client(server.address, token=server.admin_token, tls_ca=pki["ca"],
                    tls_cert=cert, tls_key=key) as admin:
            trial = admin.create_trial(9001).id
            secret = admin.reporter_token(trial)
        with Reporter(server.address, trial, token=secret, tls_ca=pki["ca"],
                      tls_cert=cert, tls_key=key) as r:
            r.record({"loss": 1.0}, time=BASE)
            r.flush(timeout=30)
            assert r.stats.acknowledged == 1
        # Without a client certificate, or trusting another CA: no connection;
        # the values stay unsent and the token is never in what is said.
        for options in (dict(tls_ca=pki["ca"]),
                        dict(tls_ca=pki["other_ca"], tls_cert=cert, tls_key=key)):
            r = Reporter(server.address, trial, token=secret, initial_backoff=0.05, **options)
            r.record({"loss": 2.0}, time=BASE + 1)
            stats = r.close(timeout=1.0)
            assert (stats.acknowledged, stats.unsent) == (0, 1)
            with Client(server.address, token=secret, timeout=5, **options) as client:
                with pytest.raises(MetricsError) as e:
                    client.get_trial(trial)
                assert e.value.code in (grpc.StatusCode.UNAVAILABLE,
                                        grpc.StatusCode.DEADLINE_EXCEEDED)
                assert secret not in str(e.value)
        assert [v for a, t, g, n, v in server.stored(trial)] == [1.0]
    finally:
        server.close()


def test_plaintext_to_a_tls_server_gets_nowhere(pki):
    server = Metricsd(["--tls-cert", pki["server"][0], "--tls-key", pki["server"][1]])
    try:
        with Client(server.address, token=server.admin_token, tls_ca=pki["ca"]) as admin:
            trial = admin.create_trial(9002).id
        r = Reporter(server.address, trial, token=server.admin_token)
        r.record({"loss": 1.0}, time=BASE)
        start = time.monotonic()
        assert r.close(timeout=1.0).unsent == 1
        assert time.monotonic() - start < 3
    finally:
        server.close()
