"""tftrain pool status | check | schema: the runner pool's hosts, as tftrain sees them (the pool
backend's survey, reached through runner.targets.factory: nothing here imports a backend)."""

from __future__ import annotations

import json
from pathlib import Path

from runner.errors import HostError
from runner.manifest import load_manifest
from runner.targets.factory import target_command


def add_arguments(parser) -> None:
    default = target_command("pool").DEFAULT_POOL_FILE
    sub = parser.add_subparsers(dest="pool_command", required=True)
    for name, text in (
        ("status", "every host: ssh, docker, NVIDIA runtime, driver, GPUs free, jobs"),
        ("check", "preflight: fail naming the first host that cannot run (the manifest's) jobs"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument(
            "--pool", help=f"the pool file (default: the manifest's compute.pool_file, else {default})"
        )
        command.add_argument(
            "-f", "--file", help="a manifest: only its eligible hosts, checked for its needs (GPU, driver)"
        )
        command.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("schema", help="print the pool file's JSON Schema")


def run(args, logger) -> int:
    pools = target_command("pool")
    if args.pool_command == "schema":
        logger.text(pools.pool_schema().rstrip("\n"))
        return 0
    manifest = load_manifest(args.file).manifest if args.file else None
    found = pools.survey(_pool_path(args, manifest, pools.DEFAULT_POOL_FILE), manifest)
    if args.json:
        logger.text(json.dumps(found.entries, indent=2))
    else:
        logger.table(f"pool {found.path}", pools.COLUMNS, found.rows)
    if args.pool_command == "check":
        problems = found.problems
        if problems:
            more = f" (and {len(problems) - 1} more host{'s' * (len(problems) > 2)})" if len(problems) > 1 else ""
            raise HostError(problems[0] + more)
        logger.info(f"pool check: {len(found.rows)} host{'s' * (len(found.rows) != 1)} ready")
    return 0


def _pool_path(args, manifest, default: str) -> Path:
    if args.pool:
        return Path(args.pool)
    if manifest is not None:
        return Path(args.file).resolve().parent / manifest.compute.pool_file
    return Path(default)
