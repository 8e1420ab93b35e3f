"""model.signing: the key a registered version's model directory is signed with (OpenSSF model
signing, runner.history.signing). The key itself never appears in the manifest, only the name of
the `secrets:` entry that holds it, and that entry is tftrain's own: masked like every secret, and
never handed to the training."""

from __future__ import annotations

from pydantic import Field

from runner.manifest.fields import ENV_NAME_PATTERN, Model


class SigningSpec(Model):
    private_key_secret: str = Field(
        pattern=ENV_NAME_PATTERN,
        description=(
            "The entry of `secrets:` (a variable of tftrain's environment) that holds the PEM private key (EC P-256, "
            "P-384 or P-521, unencrypted) the model is signed with at registration; never handed to the training"
        ),
    )


def check_signing(manifest) -> list[tuple[tuple, str]]:
    """The secret is one the manifest lists (`manifest`: a Manifest; model.py imports this module)."""
    signing = manifest.model.signing
    if signing is None or signing.private_key_secret in manifest.secrets:
        return []
    known = ", ".join(manifest.secrets) or "none listed"
    return [
        (
            ("model", "signing", "private_key_secret"),
            (
                f"{signing.private_key_secret!r} is not in secrets ({known}); list it there and set it in tftrain's"
                " environment"
            ),
        )
    ]


def signing_secret(manifest_data: dict) -> str | None:
    """The secret's name from a run record's resolved manifest (a plain dict): None when unsigned."""
    signing = (manifest_data.get("model") or {}).get("signing") or {}
    name = signing.get("private_key_secret") if isinstance(signing, dict) else None
    return name if isinstance(name, str) and name else None
