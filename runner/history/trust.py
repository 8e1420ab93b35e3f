"""Whom a model.sig must come from, for verification (runner.history.signing.verify): a signer's
public key (a PEM file given on the command line, or its text), or a Sigstore identity (keyless:
the OIDC identity and issuer the signing certificate must name).

Each is checked before anything else is done (a bad key file is one line, exit 2), and a
signature made the other way is refused in one line saying how to verify it, before the library
(and, keyless, Sigstore's servers) is asked anything. Keyless verification needs Sigstore's trust
root (TUF, fetched from Sigstore): where it cannot be fetched, one line says so; nothing passes.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from runner.errors import SignatureError, UsageError, cause
from runner.history.regular import open_regular

MAX_KEY_BYTES = 64 << 10  # a PEM key is a few hundred bytes
MAX_BUNDLE_BYTES = 256 << 20  # as signing.MAX_SIGNATURE_BYTES
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"  # what keyless signing in an Actions job gets


def public_key_problem(data: bytes) -> str | None:
    """Why `data` is not a PEM EC public key, or None."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_public_key(data) if len(data) <= MAX_KEY_BYTES else None
    except Exception:  # ValueError, and the backend's own on odd input
        key = None
    return (
        None if isinstance(key, ec.EllipticCurvePublicKey) else "not a PEM EC public key (-----BEGIN PUBLIC KEY-----)"
    )


def read_public_key(path: Path, flag: str = "--public-key") -> bytes:
    """The PEM public key file given on the command line (by `flag`); UsageError when it is not one."""
    try:
        with open_regular(path) as handle:
            data = handle.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None
    problem = public_key_problem(data)
    if problem:
        raise UsageError(f"{flag} {path}: {problem}")
    return data


@dataclass(frozen=True)
class SignerKey:
    """A signer's public key (PEM bytes, read once), named in messages as `shown`."""

    pem: bytes
    shown: str
    keyless = False

    @property
    def described(self) -> str:
        return f"the key {self.shown}"

    @contextmanager
    def configured(self, model_signing, config) -> Iterator[None]:
        fd = os.memfd_create("tftrain-public-key", os.MFD_CLOEXEC)  # read once: the file may change under us
        try:
            os.write(fd, self.pem)
            config.use_elliptic_key_verifier(public_key=f"/proc/self/fd/{fd}")
            yield
        finally:
            os.close(fd)


@dataclass(frozen=True)
class SigstoreIdentity:
    """Keyless: the signing certificate must name `identity` (an e-mail, or a workflow's URI) as
    issued on a token of `issuer`, and be in Sigstore's transparency log."""

    identity: str
    issuer: str
    keyless = True

    @property
    def described(self) -> str:
        return f"the identity {self.identity!r} (issuer {self.issuer})"

    @contextmanager
    def configured(self, model_signing, config) -> Iterator[None]:
        try:  # the verifier fetches Sigstore's trust root (TUF) as it is made
            config.use_sigstore_verifier(identity=self.identity, oidc_issuer=self.issuer)
        except Exception as exc:  # TUFError, HTTP and connection errors
            raise SignatureError(
                "Sigstore: keyless verification needs Sigstore's trust root (TUF), which could not be fetched "
                f"({type(exc).__name__}: {cause(exc)[:200]}): is Sigstore reachable from here? Nothing was verified"
            ) from None
        yield


Trusted = SignerKey | SigstoreIdentity


def signer_key(path: Path, flag: str) -> SignerKey:
    return SignerKey(read_public_key(path, flag), str(path))


def trusted_from(key: Path | None, identity: str | None, issuer: str | None, key_flag: str) -> Trusted | None:
    """What the command line trusts: `key_flag FILE`, or --verify-identity with --verify-issuer
    (keyless); None when neither is given. UsageError for half a pair or both ways at once."""
    if (identity is None) != (issuer is None):
        raise UsageError(
            "--verify-identity and --verify-issuer go together (the certificate's identity and its OIDC issuer, "
            f"e.g. {GITHUB_ISSUER})"
        )
    if key is not None and identity is not None:
        raise UsageError(f"{key_flag} verifies a key's signature, --verify-identity a keyless one: give one of them")
    if identity is not None:
        for flag, value in (("--verify-identity", identity), ("--verify-issuer", issuer)):
            if not value.strip() or len(value) > 1024 or any(ord(c) < 32 for c in value):
                raise UsageError(f"{flag}: give an identity (e-mail or URI) and an issuer URL of one line")
        return SigstoreIdentity(identity, issuer)
    return signer_key(key, key_flag) if key is not None else None


def method_problem(signature: Path, trusted: Trusted) -> str | None:
    """Why `signature` cannot be verified the way `trusted` asks (made with a key, asked keylessly,
    or the other way round), or None (also when its bundle cannot be read: the library says why)."""
    try:
        with open_regular(signature) as handle:
            material = json.loads(handle.read(MAX_BUNDLE_BYTES + 1))["verificationMaterial"]
        keyed = "publicKey" in material
        certified = "certificate" in material or "x509CertificateChain" in material
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    if trusted.keyless and keyed and not certified:
        return (
            "model.sig was signed with a key, not keylessly (Sigstore): verify it with the signer's public key"
            " (--verify-key)"
        )
    if not trusted.keyless and certified and not keyed:
        return (
            "model.sig was signed keylessly (Sigstore), not with a key: verify it with --verify-identity and"
            f" --verify-issuer (keyless signing in GitHub Actions: issuer {GITHUB_ISSUER})"
        )
    return None
