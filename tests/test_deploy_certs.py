"""simulations.deploy_certs: the deployment's CA, SuperLink certificate and SuperNode keys."""

from __future__ import annotations

import ipaddress
import shutil
import stat
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_ssh_private_key, load_ssh_public_key

from simulations.deploy_certs import main, make_certificates


def test_the_superlink_certificate_is_issued_by_the_ca_for_the_given_hosts(tmp_path):
    made = make_certificates(tmp_path / "certs", ["127.0.0.1", "superlink.example.org"], nodes=2)
    ca = x509.load_pem_x509_certificate(made["ca.crt"].read_bytes())
    server = x509.load_pem_x509_certificate(made["superlink.crt"].read_bytes())
    server.verify_directly_issued_by(ca)  # raises if not signed by the CA
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert names.get_values_for_type(x509.DNSName) == ["superlink.example.org"]
    assert made["root.crt"].read_bytes() == made["ca.crt"].read_bytes()
    for index in range(2):  # OpenSSH EC keys on a NIST curve, as Flower reads them; the pair matches
        private = load_ssh_private_key(made[f"node-{index}.key"].read_bytes(), None)
        public = load_ssh_public_key(made[f"node-{index}.pub"].read_bytes())
        assert isinstance(public, ec.EllipticCurvePublicKey) and public.curve.name == "secp384r1"
        assert private.public_key().public_numbers() == public.public_numbers()
    for name in ("ca.key", "superlink.key", "node-0.key", "node-1.key"):
        assert stat.S_IMODE(made[name].stat().st_mode) == 0o600


def test_existing_files_are_never_overwritten_and_bad_input_exits_2(tmp_path, capsys):
    made = make_certificates(tmp_path, ["localhost"])
    before = made["ca.crt"].read_bytes()
    with pytest.raises(ValueError, match="already holds"):
        make_certificates(tmp_path, ["localhost"])
    assert made["ca.crt"].read_bytes() == before
    assert main([str(tmp_path / "none"), "--hosts", " , "]) == 2
    assert main([str(tmp_path / "neg"), "--hosts", "a", "--nodes", "-1"]) == 2
    assert not (tmp_path / "none").exists() and not (tmp_path / "neg").exists()
    assert capsys.readouterr().err.count("error:") == 2


def _git(repository, *arguments) -> str:
    return subprocess.run(["git", "-C", str(repository), *arguments], check=True, capture_output=True, text=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_add_in_a_repository_holding_the_keys_stages_no_private_key(tmp_path):
    """Keys made in a subdirectory of a repository, or in its root beside a user's .gitignore (kept):
    `git add .` stages the certificates and public keys, never a private key."""
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("*.log")  # a user's own, without a final newline
    make_certificates(tmp_path / "certs", ["localhost"], nodes=1)
    make_certificates(tmp_path, ["localhost"], nodes=1)
    _git(tmp_path, "add", ".")
    staged = _git(tmp_path, "diff", "--cached", "--name-only").split()
    assert not [name for name in staged if name.endswith(".key")], staged
    assert {"ca.crt", "node-0.pub", "certs/ca.crt", "certs/node-0.pub", ".gitignore"} <= set(staged)
    assert (tmp_path / ".gitignore").read_text().splitlines()[0] == "*.log"
    assert stat.S_IMODE((tmp_path / "certs").stat().st_mode) == 0o700
