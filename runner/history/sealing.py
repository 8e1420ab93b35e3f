"""What registration adds to a version beside its files, before the version takes its name:
provenance.intoto.json (always) and model.sig (when model.signing names a key, or the action asks
for keyless signing) over the version as it stands then: model/ and the files kept with it
(serving/, scoring/, model.onnx). Both are part of the version from the start: a version is never
seen without the signature its manifest asked for. And the way back: a version, or a copy of it,
checked against its model.sig."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import SignatureError
from runner.history import provenance
from runner.history.checksums import copy_file, fresh_dir
from runner.history.model_registry import ModelVersion, checkout_version, refuse_filled
from runner.history.signing import (
    SIGNATURE,
    Signed,
    held_key,
    read_public_key,
    sign_keyless,
    sign_with_key,
    signature_problem,
    verify,
)
from runner.history.trust import Trusted
from runner.manifest.signing import signing_secret
from runner.settings import Settings


@dataclass(frozen=True)
class Seal:
    run_json: Path
    lock: Path
    key_secret: str | None = None  # the secrets: entry that holds the private key
    keyless: bool = False  # Sigstore, as the GitHub Actions job (the key wins when both are asked for)
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    manifest_path: Path | None = None  # the manifest the run was loaded from, when the caller knows it
    workflow: object = None  # the workflow run (runner.settings.GitHubContext), when in one

    @property
    def signs(self) -> bool:
        return self.key_secret is not None or self.keyless

    def __call__(self, staging: Path, sums: dict[str, str], extras: dict[str, str]) -> dict:
        """Write the provenance and the signature into the version being made (`staging`); what
        version.json says of them."""
        facts = provenance.gather(self.run_json, self.lock, self.workflow or {}, self.manifest_path)
        document = provenance.statement(sums, extras, facts, time.time())
        info: dict = {
            "provenance": {"file": provenance.FILE, "sha256": provenance.write(staging / provenance.FILE, document)}
        }
        if facts.left_out:  # what the statement could not say, and why (`models register` tells it)
            info["provenance"]["left_out"] = list(facts.left_out)
        signed = self._sign(staging, staging / SIGNATURE)
        if signed is not None:
            info["signature"] = signed.as_json()
        return info

    def _sign(self, version: Path, signature: Path) -> Signed | None:
        if self.key_secret is not None:
            pem = held_key(self.key_secret, self.environ)
            if not pem:
                raise SignatureError(
                    f"model.signing.private_key_secret: {self.key_secret} is not set in tftrain's environment"
                )
            return sign_with_key(version, signature, pem, self.key_secret)
        if self.keyless:
            return sign_keyless(version, signature, self.environ)
        return None


def seal_for(
    run_dir: Path, manifest: dict, settings: Settings, environ: Mapping[str, str], manifest_path: Path | None = None
) -> Seal:
    """The seal of a version registered from the run in `run_dir` whose resolved manifest (a plain
    dict, as run.json holds it) is `manifest`: keyless as `settings` say, in their workflow run."""
    key = signing_secret(manifest)
    return Seal(
        run_dir / "run.json",
        run_dir / "manifest.lock.yml",
        key,
        settings.inputs.sign_keyless,
        environ,
        manifest_path,
        settings.github,
    )


# --- reading a signed version back --------------------------------------------------------------


def verify_version(model: ModelVersion, public_key: Path | Trusted) -> None:
    """The registered version (model/ and every file served with it) is what its model.sig signed
    with `public_key`'s key (or as the Sigstore identity given); SignatureError otherwise."""
    verify(model.path, model.path / SIGNATURE, public_key, model.label)


def copy_signature(model: ModelVersion, target: Path) -> Path:
    """The version's model.sig copied to `target` (to verify a copy of the files against a copy of
    it, neither changing under the check); SignatureError when it is missing or not a file."""
    source = model.path / SIGNATURE
    problem = signature_problem(source)
    copied = copy_file(source, target) if problem is None else None
    if not isinstance(copied, tuple):
        raise SignatureError(f"model {model.label}: {problem or f'{SIGNATURE} is {copied.described}'}")
    return target


def pull_verified(model: ModelVersion, out_dir: Path, public_key: Path) -> None:
    """Copy the version's model/ into out_dir as Registry.pull does, keeping it only when the copy of
    the whole version is what model.sig signed: otherwise nothing is left in out_dir."""
    import shutil
    import tempfile

    read_public_key(public_key, "--verify-key")  # a wrong key file is said before anything is copied
    refuse_filled(out_dir)
    with tempfile.TemporaryDirectory(prefix="tftrain-verify-") as scratch, fresh_dir(out_dir) as staging:
        signature = copy_signature(model, Path(scratch) / SIGNATURE)
        # beside staging: the same file system, so that the verified model/ is renamed, not copied
        root = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".version", dir=staging.parent))
        try:
            checkout_version(model, root)
            verify(root, signature, public_key, model.label, served=False)  # model/ is all that is kept
            os.rename(root / "model", staging)  # onto the empty staging directory
        finally:
            shutil.rmtree(root, ignore_errors=True)
