"""tftrain models [NAME] | models pull REF -o DIR | models verify REF --public-key FILE | models register RUN: the model
registry."""

from __future__ import annotations

import os
import time
from pathlib import Path

from runner.cli.verifying import add_keyless_arguments, trusted
from runner.errors import RegistryError, UsageError
from runner.github import workflow
from runner.github.publish import pull_release
from runner.history.checksums import copy_tree, fresh_dir
from runner.history.model_registry import Registry, refuse_filled
from runner.history.rundir import RunPaths
from runner.history.sealing import pull_verified, seal_for, verify_version
from runner.history.signing import SIGNATURE, Coverage, coverage_of, read_public_key, signer_named, verify
from runner.history.store import Store
from runner.paths import tftrain_home
from runner.settings import resolve
from runner.targets.leftovers import reconcile
from runner.telemetry.summary import primary_metric


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="models_command")
    listing = sub.add_parser("list", help="list models (the default)")
    listing.add_argument("name", nargs="?", help="only this model")
    pull = sub.add_parser("pull", help="copy a model version out of the registry, verifying checksums")
    pull.add_argument("ref", help="NAME, NAME@vN or NAME@latest")
    pull.add_argument("-o", "--output", type=Path, required=True, help="an empty or new directory")
    pull.add_argument(
        "--from",
        dest="source",
        choices=("local", "github"),
        default="local",
        help="this machine's registry (default) or the repository's GitHub Releases",
    )
    pull.add_argument(
        "--verify-key",
        type=Path,
        metavar="FILE",
        help="keep nothing unless the version's model.sig verifies with this public key (PEM)",
    )
    verify = sub.add_parser(
        "verify", help="check a version's files against its signature, model.sig (OpenSSF model signing)"
    )
    verify.add_argument("ref", help="NAME, NAME@vN or NAME@latest")
    verify.add_argument("--public-key", type=Path, metavar="FILE", help="the signer's public key (PEM)")
    add_keyless_arguments(verify)
    verify.add_argument(
        "--from",
        dest="source",
        choices=("local", "github"),
        default="local",
        help="this machine's registry (default) or the repository's GitHub Releases",
    )
    register = sub.add_parser("register", help="register the model a run wrote (e.g. of a canceled run)")
    register.add_argument("run", help="run id, run number, or latest")


def run(args, logger) -> int:
    if args.models_command == "verify":  # whom to trust, checked before anything is looked up
        args.trusted = trusted(args, "--public-key", args.public_key)
        if args.trusted is None:
            raise UsageError(
                "models verify: give the signer's --public-key FILE, or --verify-identity and --verify-issuer (keyless)"
            )
    with Store(tftrain_home(), notify=logger.warning) as store:  # `register` reconciles: a lost run it finds is told
        registry = Registry(store)
        if args.models_command in ("pull", "verify") and args.source == "github":
            _from_github(args, logger)
        elif args.models_command == "pull" and args.verify_key is not None:
            model = registry.resolve(args.ref)
            pull_verified(model, args.output, args.verify_key)
            logger.info(f"{model.label} → {args.output} (checksums and {SIGNATURE} verified)", style="green")
        elif args.models_command == "pull":
            model = registry.pull(args.ref, args.output)
            logger.info(f"{model.label} → {args.output} (checksums verified)", style="green")
        elif args.models_command == "verify":
            model = registry.resolve(args.ref)
            verify_version(model, args.trusted)
            logger.info(
                f"{model.label}: {SIGNATURE} verified with {signer_named(args.trusted)} ({model.info.get('files', '?')}"
                " files)",
                style="green",
            )
        elif args.models_command == "register":
            _register(store, registry, args.run, logger)
        else:
            _list(registry, getattr(args, "name", None), logger)
    return 0


def _from_github(args, logger) -> None:
    """pull (--verify-key: kept only when model.sig verifies) or verify, from the Releases."""
    import tempfile

    from runner.serving.refs import fetch_serving_assets

    key = args.trusted if args.models_command == "verify" else args.verify_key
    if key is not None and args.models_command == "pull":
        read_public_key(key, "--verify-key")
    settings = resolve(os.environ, args)
    with workflow.github_errors():
        repo = workflow.client(settings.github).get_repo(settings.github.repository)
        if key is None:
            pull_release(repo, args.ref, args.output, logger, settings)
            return
        if args.models_command == "pull":
            refuse_filled(args.output)
        with tempfile.TemporaryDirectory(prefix="tftrain-verify-") as scratch:
            signature, root = Path(scratch) / SIGNATURE, Path(scratch) / "version"
            tag = pull_release(repo, args.ref, root / "model", logger, settings, signature)
            if args.models_command == "verify" or coverage_of(signature) is Coverage.VERSION:
                # the release's serving files in the version's layout: what model.sig signed, or (made
                # over model/ alone) what `verify` must not call verified
                fetch_serving_assets(repo.get_release(tag), root, settings.archive_limits)
            verify(root, signature, key, tag, served=args.models_command == "verify")
            if args.models_command == "verify":
                logger.info(f"{tag}: {SIGNATURE} verified with {signer_named(key)}", style="green")
                return
            with fresh_dir(args.output) as staging:
                copy_tree(root / "model", staging)
            logger.info(f"{tag} → {args.output} ({SIGNATURE} verified with {key})", style="green")


def _list(registry: Registry, name: str | None, logger) -> None:
    rows = []
    for model in registry.versions(name):
        primary, value = primary_metric(model.info.get("metrics", {}))
        metric = f"{primary}={value:.4g}" if isinstance(value, float) else ""
        commit = (model.info.get("git") or {}).get("commit") or ""
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(model.created))
        rows.append(
            [
                model.name,
                f"v{model.version}",
                created,
                model.run_id or "",
                metric,
                commit[:10],
                str(model.info.get("bytes", "")),
            ]
        )
    if not rows:
        logger.info("no models registered yet" + (f" under the name {name}" if name else ""))
        return
    logger.table("models", ["name", "version", "registered", "run", "primary metric", "commit", "bytes"], rows)


def _register(store: Store, registry: Registry, ref: str, logger) -> None:
    reconcile(store)  # the version records the run's status: a lost run's is Failed
    run = store.run(ref)
    manifest, paths = RunPaths.of_run(run)
    path = paths.workdir / manifest.model.path
    if not path.exists():
        raise RegistryError(f"run {run.run_id} wrote no model at {manifest.model.path}")
    info = {
        "run_id": run.run_id,
        "git": run.git,
        "framework": manifest.model.framework,
        "registered_from_status": run.status,
    }
    seal = seal_for(paths.root, manifest.model_dump(mode="json", by_alias=True), resolve(os.environ), os.environ)
    model = registry.register(manifest.name, path, run.run_id, info, seal=seal)
    logger.info(f"registered model {model.label} from run {run.run_id} ({run.status})", style="green")
    for line in (model.info.get("provenance") or {}).get("left_out") or []:
        logger.warning(f"{line}: its provenance leaves it out")
    if model.skipped:
        logger.warning(model.skipped_note(str(manifest.model.path)))
