"""python -m runner.serving.verify_model --model-dir DIR (--public-key-env NAME | --public-key FILE |
--identity ID --issuer URL) [--signature FILE]: the serving image's init container.

It runs in the serving image (same digest as the server, its environment holding OpenSSF model
signing when deploy was given --verify-key) before the server container starts, and checks the
version's files at DIR (model/, serving/, model.onnx, …) against DIR/model.sig, as
`tftrain serve --verify-key` does: exit 0 when intact; otherwise one line on stderr and
SignatureError's exit code (29), and Kubernetes never starts the server.

The public key is in the InferenceService itself, as an env value of this container: a public key
is not a secret, and the document that pins the image's digest then also pins whom its model
must come from — one object, applied at once, that nothing else (a ConfigMap edited on its own)
can change behind it.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from runner.errors import FatalError, SignatureError, UsageError
from runner.history.signing import SIGNATURE, verify
from runner.history.trust import MAX_KEY_BYTES, SignerKey, SigstoreIdentity, Trusted, public_key_problem, signer_key

KEY_VARIABLE = "TFTRAIN_MODEL_PUBLIC_KEY"
INIT_CONTAINER = "verify-model"
MODULE = "runner.serving.verify_model"


@dataclass(frozen=True)
class Verifier:
    """The init container of an InferenceService whose image holds the version at `model_dir`."""

    model_dir: str
    public_key_pem: str | None = None  # key signing
    identity: str | None = None  # keyless (Sigstore: the cluster must reach it)
    issuer: str | None = None

    @classmethod
    def of(cls, trusted: Trusted, model_name: str) -> Verifier:
        from runner.serving.image import MODELS_DIR

        model_dir = f"{MODELS_DIR}/{model_name}"
        if isinstance(trusted, SigstoreIdentity):
            return cls(model_dir, identity=trusted.identity, issuer=trusted.issuer)
        return cls(model_dir, public_key_pem=trusted.pem.decode("ascii"))

    def container(self, image: str, resources: dict) -> dict:
        command = ["python", "-m", MODULE, "--model-dir", self.model_dir]
        container = {"name": INIT_CONTAINER, "image": image, "command": command}
        if self.public_key_pem is not None:
            command += ["--public-key-env", KEY_VARIABLE]
            container["env"] = [{"name": KEY_VARIABLE, "value": self.public_key_pem}]
        else:
            command += ["--identity", self.identity, "--issuer", self.issuer]
        container["resources"] = resources  # hashing a large model takes the server's CPU and memory, not more
        return container


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verify_model", description="verify a model version's files against its model.sig"
    )
    parser.add_argument("--model-dir", type=Path, required=True, help="the version: model/ and what is served with it")
    parser.add_argument("--signature", type=Path, help=f"default: MODEL_DIR/{SIGNATURE}")
    parser.add_argument("--public-key-env", metavar="NAME", help="the signer's PEM public key, in this variable")
    parser.add_argument("--public-key", type=Path, metavar="FILE", help="the signer's PEM public key, in this file")
    parser.add_argument("--identity", help="keyless: the Sigstore identity")
    parser.add_argument("--issuer", help="keyless: its OIDC issuer")
    return parser


def trusted_of(args) -> Trusted:
    given = [
        flag
        for flag, value in (
            ("--public-key-env", args.public_key_env),
            ("--public-key", args.public_key),
            ("--identity", args.identity),
        )
        if value is not None
    ]
    if len(given) != 1 or (args.identity is None) != (args.issuer is None):
        raise UsageError("give one of --public-key-env NAME, --public-key FILE, or --identity ID with --issuer URL")
    if args.public_key is not None:
        return signer_key(args.public_key, "--public-key")
    if args.identity is not None:
        return SigstoreIdentity(args.identity, args.issuer)
    pem = os.environ.get(args.public_key_env)
    if pem is None:
        raise UsageError(f"--public-key-env {args.public_key_env}: ${args.public_key_env} is not set")
    data = pem.encode("utf-8", "surrogateescape")[: MAX_KEY_BYTES + 1]
    problem = public_key_problem(data)
    if problem:
        raise UsageError(f"${args.public_key_env}: {problem}")
    return SignerKey(data, f"${args.public_key_env}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        trusted = trusted_of(args)
        signature = args.signature or args.model_dir / SIGNATURE
        verify(args.model_dir, signature, trusted, str(args.model_dir), served=True)
    except FatalError as exc:
        print(f"verify_model: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # never a traceback, never a pass: one line, the signature's exit code
        print(f"verify_model: error: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return SignatureError.exit_code
    print(f"verify_model: {args.model_dir} is what {SIGNATURE} signed ({trusted.described})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
