"""The options that make a command act only on a verified version (serve, deploy, models verify):
a signer's public key, or a Sigstore identity and issuer (keyless), read and checked before the
command does anything else."""

from __future__ import annotations

from pathlib import Path

from runner.history.signing import SIGNATURE
from runner.history.trust import GITHUB_ISSUER, Trusted, trusted_from


def add_keyless_arguments(parser) -> None:
    parser.add_argument(
        "--verify-identity",
        metavar="ID",
        help=(
            f"keyless: the version's {SIGNATURE} must be Sigstore's, for this identity (an e-mail, or a workflow's URI)"
        ),
    )
    parser.add_argument(
        "--verify-issuer",
        metavar="URL",
        help=f"keyless: the OIDC issuer of that identity (GitHub Actions: {GITHUB_ISSUER}); needs Sigstore reachable",
    )


def add_verify_arguments(parser, doing: str) -> None:
    """--verify-key FILE and the keyless pair; `doing`: what the command does only once verified."""
    parser.add_argument(
        "--verify-key",
        type=Path,
        metavar="FILE",
        help=f"{doing} only when the version's {SIGNATURE} verifies with this public key (PEM)",
    )
    add_keyless_arguments(parser)


def trusted(args, key_flag: str = "--verify-key", key: Path | None = None) -> Trusted | None:
    """Whom the command line trusts (None: verification not asked for); UsageError when a key file
    is not a public key or the keyless pair is half given."""
    return trusted_from(
        key if key is not None else getattr(args, "verify_key", None),
        getattr(args, "verify_identity", None),
        getattr(args, "verify_issuer", None),
        key_flag,
    )
