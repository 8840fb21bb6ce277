"""TLS certificates and SuperNode keys for a Flower deployment (docs/deployment.md), made with the
`cryptography` package (no openssl binary needed).

    python -m simulations.deploy_certs DIR --hosts superlink.example.org,10.0.0.5 --nodes 2

writes into DIR (created; files that exist are refused, nothing overwritten):
- `ca.crt`, `ca.key`: a certificate authority of this deployment (keep ca.key off the machines);
- `superlink.crt`, `superlink.key`: the SuperLink's certificate for the given hosts (DNS names or IP
  addresses, each a subjectAltName), signed by the CA: `flower-superlink --ssl-ca-certfile ca.crt
  --ssl-certfile superlink.crt --ssl-keyfile superlink.key`;
- `root.crt`: the SuperNodes' root bundle (the CA certificate): `flower-supernode --root-certificates
  root.crt`, and `root-certificates` in the Flower configuration of `flwr run`;
- `node-I.key`, `node-I.pub` for I in 0..nodes-1: each SuperNode's key pair (EC P-384, OpenSSH
  format, as Flower reads them): `flower-supernode --auth-supernode-private-key node-I.key` on the
  node, `flwr supernode register node-I.pub` against a SuperLink started with
  `--enable-supernode-auth`. Private keys are written owner-only (0600).

and keeps the private keys out of git wherever DIR is: DIR's `.gitignore` gets the line `*.key`
(created, or appended to one that lacks it) before any key is written, so `git add .` in a
repository that holds DIR stages no key; a DIR this creates is owner-only (0700).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365
CURVE = ec.SECP384R1  # a NIST curve: Flower refuses SuperNode keys on other curves


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


KEYS_IGNORED = "*.key"  # every private key this writes: ca.key, superlink.key, node-I.key


def _ignore_keys(directory: Path) -> None:
    """`*.key` in directory/.gitignore: git never stages a private key, whatever repository holds
    the directory (a user's other ignore lines are kept)."""
    ignore = directory / ".gitignore"
    text = ignore.read_text() if ignore.exists() else ""
    if KEYS_IGNORED in text.splitlines():
        return
    separator = "\n" if text and not text.endswith("\n") else ""
    with ignore.open("a") as file:
        file.write(f"{separator}# private keys (simulations.deploy_certs): never in a repository\n{KEYS_IGNORED}\n")


def _write(path: Path, data: bytes, private: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    with os.fdopen(os.open(path, flags, 0o600 if private else 0o644), "wb") as file:
        file.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def planned_files(hosts: list[str], nodes: int) -> list[str]:
    files = ["ca.crt", "ca.key", "superlink.crt", "superlink.key", "root.crt"]
    return files + [f"node-{index}.{suffix}" for index in range(nodes) for suffix in ("key", "pub")]


def make_certificates(directory: str | Path, hosts: list[str], nodes: int = 0) -> dict[str, Path]:
    """Write the CA, the SuperLink's certificate for `hosts` and `nodes` SuperNode key pairs into
    `directory`; returns {file name: path}. ValueError on no host or a file that exists."""
    hosts = [host.strip() for host in hosts if host.strip()]
    if not hosts:
        raise ValueError("give at least one host (DNS name or IP address) the SuperLink is reached at")
    if nodes < 0:
        raise ValueError(f"nodes must be >= 0, got {nodes}")
    directory = Path(directory)
    names = planned_files(hosts, nodes)
    existing = [name for name in names if (directory / name).exists()]
    if existing:
        raise ValueError(f"{directory} already holds {', '.join(existing)} (nothing overwritten)")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # the mode applies to a directory made here
    _ignore_keys(directory)
    now = datetime.datetime.now(datetime.UTC)
    until = now + datetime.timedelta(days=VALID_DAYS)

    ca_key = ec.generate_private_key(CURVE())
    ca_name = _name("ldpfed deployment CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # key_cert_sign, crl_sign
        .sign(ca_key, hashes.SHA384())
    )
    server_key = ec.generate_private_key(CURVE())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(server_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName([_alt_name(host) for host in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    files = {
        "ca.crt": (ca_pem, False),
        "ca.key": (_pem_key(ca_key), True),
        "superlink.crt": (server.public_bytes(serialization.Encoding.PEM), False),
        "superlink.key": (_pem_key(server_key), True),
        "root.crt": (ca_pem, False),
    }
    for index in range(nodes):
        key = ec.generate_private_key(CURVE())
        files[f"node-{index}.key"] = (
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            ),
            True,
        )
        files[f"node-{index}.pub"] = (
            key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) + b"\n",
            False,
        )
    for name, (data, private) in files.items():
        _write(directory / name, data, private)
    return {name: directory / name for name in files}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory")
    parser.add_argument("--hosts", required=True, help="comma-separated DNS names / IP addresses of the SuperLink")
    parser.add_argument("--nodes", type=int, default=0, help="SuperNode key pairs to make (node-I.key, node-I.pub)")
    args = parser.parse_args(argv)
    try:
        made = make_certificates(args.directory, args.hosts.split(","), args.nodes)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(str(path) for path in made.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
