"""A model version's signature, model.sig: OpenSSF model signing (PyPI `model-signing`, the
`signing` extra) over the version's directory: model/ and every file served or built with it
(serving/, scoring/, model.onnx, and anything else put there), all but what registration writes
about it (UNSIGNED: the signature records that list, so OpenSSF's own
`model_signing verify key VERSION --signature VERSION/model.sig --public_key PUB` accepts it).

Signatures made before the version's served files were signed cover model/ alone (Coverage.MODEL,
told apart by their recorded ignore list). They still verify model/; a version whose served files
they leave out is refused where it would be served or called verified, with one line saying it must
be registered again.

Key signing takes a PEM private key from a variable of tftrain's environment (model.signing's
`secrets:` entry). The key is checked here first, so that a bad one is one line that never shows
it, and reaches the library through an anonymous in-memory file (memfd): it is never written to
disk. Keyless signing (Sigstore, a GitHub Actions job's OIDC identity) fetches the job's token
itself and hands it over, so the library never falls back to an interactive login.

Every file counts: git's files (.gitignore, .git/, …), which the library leaves out by default,
are signed and verified like the rest. Verification first refuses anything in the directory that
is not a regular file or a directory (a FIFO would block the hashing, a link would be followed).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from runner.errors import SignatureError, answered, cause, extra_module, path_of, unreachable
from runner.history.checksums import EntryKind, kind_of, sums_of, walk
from runner.history.regular import open_regular
from runner.history.trust import (
    MAX_KEY_BYTES,
    Trusted,
    method_problem,
    read_public_key,  # noqa: F401 — callers import it from here
    signer_key,
)

SIGNATURE = "model.sig"
# What a version's signature leaves out, at the version's top: what registration writes about the
# signed files (version.json after signing, the signature itself) and what is derived from them
# (SHA256SUMS of model/, the provenance statement). Everything else in the version is signed.
UNSIGNED = ("version.json", SIGNATURE, "SHA256SUMS", "provenance.intoto.json")
MAX_SIGNATURE_BYTES = 256 << 20  # a line per file of the model: a million files take about 150 MB
OIDC_AUDIENCE = "sigstore"


# The signing keys taken out of tftrain's environment (`withhold`): held in this process's memory
# only, so that nothing tftrain starts (the training, pip, the gate's process) inherits them.
_withheld: dict[str, str] = {}
_withheld_lock = threading.Lock()


def withhold(name: str, environ: MutableMapping[str, str] = os.environ) -> None:
    """Move the variable `name` (model.signing's key) out of `environ` into this process's memory."""
    with _withheld_lock:
        value = environ.pop(name, None)
        if value is not None:
            _withheld[name] = value


def held_key(name: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The key the variable `name` holds: still in `environ`, or withheld from it."""
    value = environ.get(name)
    if value is not None:
        return value
    with _withheld_lock:
        return _withheld.get(name)


class SigningMethod(str, Enum):
    KEY = "key"
    KEYLESS = "sigstore"

    __str__ = str.__str__
    __format__ = str.__format__


class Coverage(str, Enum):
    """What a model.sig signed: the version directory (model/ and what is served with it), or
    model/ alone (signatures made before the served files were signed)."""

    VERSION = "version"
    MODEL = "model"

    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class Signed:
    """What version.json says of a signature: how it was made, and which key (the sha256 of its
    public half in PEM, as the library's bundle hints it) when a key made it."""

    method: SigningMethod
    public_key_sha256: str | None = None

    def as_json(self) -> dict:
        data = {"file": SIGNATURE, "method": self.method.value, "covers": Coverage.VERSION.value}
        return data | ({"public_key_sha256": self.public_key_sha256} if self.public_key_sha256 else {})


def _library():
    extra_module("model_signing", "signing", "model signing")
    import model_signing

    return model_signing


def _hashing(model_signing, ignored: tuple[str, ...] = ()):
    """sha256 per file, every file (git's too) but `ignored` (at the top), no link followed."""
    return (
        model_signing.hashing.Config()
        .use_file_serialization(hashing_algorithm="sha256", allow_symlinks=False)
        .set_ignored_paths(paths=list(ignored), ignore_git_paths=False)
    )


# --- signing ---------------------------------------------------------------------------------


def private_key(pem: str, secret: str):
    """The EC private key the secret `secret` holds; SignatureError naming the secret (never its
    value) when it is not one the library signs with."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    where = f"model.signing.private_key_secret: {secret}"
    data = pem.encode("utf-8", "surrogateescape")
    if not data.strip():
        raise SignatureError(f"{where} is empty")
    if len(data) > MAX_KEY_BYTES:
        raise SignatureError(f"{where} holds more than {MAX_KEY_BYTES >> 10} KiB: not a PEM private key")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # encrypted: the library would need its password, which nothing holds
        raise SignatureError(
            f"{where} holds an encrypted key: give it unencrypted (the secret store protects it)"
        ) from None
    except Exception:  # cryptography's words can quote the input: never shown
        raise SignatureError(f"{where} does not hold a PEM private key (-----BEGIN … PRIVATE KEY-----)") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise SignatureError(
            f"{where} holds a {type(key).__name__.removeprefix('_')} key: model signing takes an EC key (P-256, P-384"
            " or P-521)"
        )
    if key.curve.name not in ("secp256r1", "secp384r1", "secp521r1"):
        raise SignatureError(f"{where} holds an EC key on {key.curve.name}: model signing takes P-256, P-384 or P-521")
    return key


def ready_to_sign(pem: str, secret: str) -> None:
    """The key is one to sign with and the library is installed: checked before a training whose
    model will be signed, so that neither is found out after hours of it."""
    private_key(pem, secret)
    _library()


def public_key_sha256(key) -> str:
    import hashlib

    from cryptography.hazmat.primitives import serialization

    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def sign_with_key(version_dir: Path, signature: Path, pem: str, secret: str) -> Signed:
    """Sign the version directory `version_dir` (all but UNSIGNED) into `signature` with the PEM key
    `pem` (the secret `secret`'s)."""
    key = private_key(pem, secret)
    model_signing = _library()
    fd = os.memfd_create("tftrain-signing-key", os.MFD_CLOEXEC)  # the key never touches a disk
    try:
        os.write(fd, pem.encode("utf-8", "surrogateescape"))
        config = model_signing.signing.Config().set_hashing_config(_hashing(model_signing, UNSIGNED))
        config.use_elliptic_key_signer(private_key=f"/proc/self/fd/{fd}")
        _sign(config, version_dir, signature)
    finally:
        os.close(fd)
    return Signed(SigningMethod.KEY, public_key_sha256(key))


def sign_keyless(version_dir: Path, signature: Path, environ) -> Signed:
    """Sign with Sigstore as the GitHub Actions job's OIDC identity (Fulcio certificate, Rekor
    entry). SignatureError when the job has no token to give (no `id-token: write`), or when
    Sigstore cannot be reached."""
    if not environ.get("ACTIONS_ID_TOKEN_REQUEST_URL") or not environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        raise SignatureError(
            "keyless signing needs the job's OIDC token: give the job `permissions: id-token: write` "
            "(ACTIONS_ID_TOKEN_REQUEST_URL is not set)"
        )
    model_signing = _library()
    token = oidc_token(environ)
    try:
        config = model_signing.signing.Config().set_hashing_config(_hashing(model_signing, UNSIGNED))
        config.use_sigstore_signer(identity_token=token)
        _sign(config, version_dir, signature)
    except SignatureError:
        raise
    except Exception as exc:  # the library's and its transports' errors: TUFError, HTTP errors, …
        raise SignatureError(
            f"Sigstore: keyless signing failed: {cause(exc)} (is Sigstore reachable from this runner?)"
        ) from None
    return Signed(SigningMethod.KEYLESS)


def oidc_token(environ, timeout: float = 30.0) -> str:
    """The job's OIDC token for Sigstore, as GitHub hands it to a job with `id-token: write`: a GET
    of ACTIONS_ID_TOKEN_REQUEST_URL (audience added) with the request token as bearer. The answer is
    bounded; neither token is ever put in a message."""
    import json
    import urllib.error
    import urllib.parse
    import urllib.request

    url = environ["ACTIONS_ID_TOKEN_REQUEST_URL"]
    separator = "&" if urllib.parse.urlsplit(url).query else "?"
    request = urllib.request.Request(
        f"{url}{separator}audience={OIDC_AUDIENCE}",
        headers={"Authorization": f"bearer {environ['ACTIONS_ID_TOKEN_REQUEST_TOKEN']}"},
    )
    call = f"GET {path_of(url)}"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read(MAX_KEY_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise SignatureError(answered("GitHub", call, exc.code) + " (the job's OIDC token)") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SignatureError(unreachable("GitHub", call, exc) + " (the job's OIDC token)") from None
    try:
        token = json.loads(body)["value"]
    except (ValueError, KeyError, TypeError):
        token = None
    if not isinstance(token, str) or not token or len(body) > MAX_KEY_BYTES:
        raise SignatureError(f"GitHub: {call} answered no OIDC token (a JSON object with a string `value`)")
    return token


def _sign(config, files_dir: Path, signature: Path) -> None:
    try:
        config.sign(files_dir, signature)
    except OSError as exc:
        raise SignatureError(f"signing {files_dir}: {exc.strerror or exc}") from None
    except ValueError as exc:  # the library's own refusals (a link in the directory, an unsupported key)
        raise SignatureError(f"signing {files_dir}: {cause(exc)[:300]}") from None


# --- verifying -------------------------------------------------------------------------------


def verify(root: Path, signature: Path, trusted: Path | Trusted, label: str, served: bool = True) -> Coverage:
    """`root` (a version directory, or a copy of one) is exactly what `signature` signed as `trusted`
    says (a public key: the file's path, or a SignerKey; a Sigstore identity: keyless);
    SignatureError "model LABEL: …" saying what differs otherwise. A signature that covers model/
    alone verifies model/; with `served` (the version is to be served, built or called verified as
    a whole) it is refused when `root` holds more than model/."""
    if isinstance(trusted, Path):
        trusted = signer_key(trusted, "--public-key")
    problem = signature_problem(signature)
    coverage = coverage_of(signature) if problem is None else Coverage.VERSION
    files_dir = root if coverage is Coverage.VERSION else root / "model"
    problem = problem or method_problem(signature, trusted) or _entries_problem(root) or _entries_problem(files_dir)
    if problem:
        raise SignatureError(f"model {label}: {problem}")
    model_signing = _library()
    config = model_signing.verifying.Config().set_hashing_config(_hashing(model_signing))
    with trusted.configured(model_signing, config):
        try:
            config.verify(files_dir, signature)
        except Exception as exc:  # the library says "Signature mismatch: [...]", or fails on a bad bundle
            raise SignatureError(
                f"model {label}: {_described(exc, files_dir, signature, trusted.described, coverage)}"
            ) from None
    unsigned = served_beside_model(root) if coverage is Coverage.MODEL and served else []
    if unsigned:
        raise SignatureError(
            f"model {label}: {SIGNATURE} covers model/ only (made before tftrain signed what a version serves): "
            f"{_names(unsigned)} would be served unsigned; register the model again to sign them"
        )
    return coverage


def coverage_of(signature: Path) -> Coverage:
    """What `signature` says it covers, read before the library checks it: a signature altered to say
    otherwise no longer verifies. One that cannot be read is left to the library to describe."""
    try:
        ignored = _payload(signature)["predicate"]["serialization"].get("ignore_paths") or []
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return Coverage.VERSION
    return Coverage.VERSION if isinstance(ignored, list) and "version.json" in ignored else Coverage.MODEL


def served_beside_model(root: Path) -> list[str]:
    """The files of the version directory `root` outside model/ that a signature covering model/
    alone leaves out (serving/, scoring/, model.onnx, …): everything but UNSIGNED."""
    return [
        entry.name
        for entry in walk(root)
        if entry.kind is EntryKind.FILE and not entry.name.startswith("model/") and entry.name not in UNSIGNED
    ]


def signature_problem(signature: Path) -> str | None:
    """Why `signature` cannot be a model.sig to verify (missing, not a regular file, too large), or None."""
    kind = kind_of(signature)
    if kind is None:
        return f"{SIGNATURE} is missing: the version is not signed (model.signing) or it was removed"
    if kind is not EntryKind.FILE:
        return f"{SIGNATURE} is {kind.described}"
    if signature.stat().st_size > MAX_SIGNATURE_BYTES:
        return f"{SIGNATURE} is larger than {MAX_SIGNATURE_BYTES >> 20} MiB: not a signature"
    return None


def _entries_problem(files_dir: Path) -> str | None:
    kind = kind_of(files_dir)
    if kind is not EntryKind.DIRECTORY:
        return f"{files_dir} is {'missing' if kind is None else kind.described}"
    odd = [
        f"{entry.name} is {entry.kind.described}"
        for entry in walk(files_dir)
        if entry.kind not in (EntryKind.FILE, EntryKind.DIRECTORY)
    ]
    return "; ".join(odd[:3]) + (f" (and {len(odd) - 3} more)" if len(odd) > 3 else "") if odd else None


def signed_files(signature: Path) -> dict[str, str]:
    """name → sha256 of every file the signature lists (its in-toto payload's resources). Read only
    once the library has verified the signature: the payload is then what the key signed."""
    return {item["name"]: item["digest"] for item in _payload(signature)["predicate"]["resources"]}


def _payload(signature: Path) -> dict:
    """The in-toto statement a model.sig holds (not checked: the library checks it)."""
    import base64
    import json

    with open_regular(signature) as handle:
        bundle = json.loads(handle.read(MAX_SIGNATURE_BYTES + 1))
    return json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))


def _described(exc: Exception, files_dir: Path, signature: Path, signer: str, coverage: Coverage) -> str:
    from cryptography.exceptions import InvalidSignature

    text = str(exc)
    if isinstance(exc, InvalidSignature) or text.startswith(("Key mismatch", "Signature verification failed")):
        return f"{SIGNATURE} was not made with {signer} (or it was altered since)"
    if (
        isinstance(exc, (UnicodeError, LookupError, TypeError, AttributeError))
        or type(exc).__name__ == "JSONDecodeError"
    ):
        return f"{SIGNATURE} is not a model signature ({type(exc).__name__})"
    if not text.startswith("Signature mismatch"):
        return f"{SIGNATURE} does not verify with {signer}: {cause(exc)[:300] or type(exc).__name__}"
    try:
        expected = signed_files(signature)
    except (OSError, ValueError, KeyError, TypeError):  # changed since the library read it
        return f"the files are not what {SIGNATURE} signed"
    actual = sums_of(files_dir)
    if coverage is Coverage.VERSION:
        actual = {name: digest for name, digest in actual.items() if name not in UNSIGNED}
    found = (
        ("changed", [name for name in expected if name in actual and actual[name] != expected[name]]),
        ("added (not signed)", [name for name in actual if name not in expected]),
        ("removed", [name for name in expected if name not in actual]),
    )
    parts = [f"{words}: {_names(names)}" for words, names in found if names]
    return f"the files are not what {SIGNATURE} signed: " + ("; ".join(parts) or "they changed while being verified")


def _names(names: list[str], shown: int = 5) -> str:
    return ", ".join(map(repr, names[:shown])) + (f" (and {len(names) - shown} more)" if len(names) > shown else "")


def signer_named(trusted_by: Trusted) -> str:
    return trusted_by.shown if not trusted_by.keyless else f"Sigstore identity {trusted_by.identity!r}"


def verify_copy(root: Path, signature: Path, trusted_by: Trusted, label: str, logger) -> None:
    """The checked-out copy `root` is what `signature` (a copy of the version's model.sig) signed:
    model/ and everything served with it; SignatureError (exit 29) otherwise."""
    verify(root, signature, trusted_by, label, served=True)
    logger.info(f"{label}: {SIGNATURE} verified with {signer_named(trusted_by)}", style="green")
