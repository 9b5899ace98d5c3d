"""The host's CA certificates inside (profile key host_ca_certificates):
behind a TLS-intercepting proxy the company CA installed on the host is
trusted in the sandbox; a private key saved next to it never is copied."""
import subprocess

from conftest import make_git_repo


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.crt", "-days", "30", "-subj", "/CN=Lazaret Test Proxy CA", cwd=d)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "leaf.key",
            "-out", "leaf.csr", "-subj", "/CN=registry.test", cwd=d)
    openssl("x509", "-req", "-in", "leaf.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "leaf.pem", "-days", "30", cwd=d)


CHECK = ("openssl verify -CAfile /etc/ssl/certs/ca-certificates.crt /workspace/leaf.pem; "
         "echo verify=$?; echo NODE=$NODE_EXTRA_CA_CERTS; "
         "grep -rl 'PRIVATE KEY' /etc/ssl /usr/local/share/ca-certificates; echo grep=$?")


def run(lazaret, env, ws, cmd):
    return subprocess.run([lazaret, "run", "-p", "test", "--", "bash", "-c", cmd], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=600)


def test_host_ca_trusted_inside(lazaret, debian, tmp_path):
    pki = tmp_path / "pki"
    pki.mkdir()
    make_pki(pki)
    ws = make_git_repo(tmp_path / "ws")
    (ws / "leaf.pem").write_bytes((pki / "leaf.pem").read_bytes())
    cas = debian.base / "host-ca" / "corp"
    cas.mkdir(parents=True)
    # The administrator saved the key next to the certificate, in one file.
    (cas / "proxy.crt").write_text((pki / "ca.key").read_text() + (pki / "ca.crt").read_text())
    try:
        r = run(lazaret, debian.environ(), ws, CHECK + "; update-ca-certificates >/dev/null 2>&1; " + CHECK)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.count("/workspace/leaf.pem: OK") == 2, r.stdout  # also after update-ca-certificates
        assert r.stdout.count("verify=0") == 2
        assert "NODE=/etc/ssl/certs/ca-certificates.crt" in r.stdout
        assert r.stdout.count("grep=1") == 2, r.stdout  # no private key anywhere
        # Control: the profile turns it off; the same leaf does not verify.
        debian.write_config(extra_profile="host_ca_certificates = false\n")
        r = run(lazaret, debian.environ(), ws, CHECK)
        assert "verify=2" in r.stdout and "leaf.pem: OK" not in r.stdout, r.stdout
        assert "NODE=\n" in r.stdout
    finally:
        debian.write_config()
        for f in cas.iterdir():
            f.unlink()
