"""tftrain images [prune]: the training images tftrain built (labelled tftrain.content-hash)."""

from __future__ import annotations

import time

from runner.targets.docker.container import docker_client
from runner.targets.docker.images import LABEL

HASH_LABEL = f"{LABEL}.content-hash"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="images_command")
    prune = sub.add_parser("prune", help="remove all but the newest images of each model")
    prune.add_argument("--keep", type=int, default=1, help="newest images to keep per model name (default 1)")
    prune.add_argument("--model", help="only this model's images")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be removed")


def run(args, logger) -> int:
    client = docker_client()
    images = sorted(client.images.list(filters={"label": HASH_LABEL}), key=_created, reverse=True)
    if args.images_command == "prune":
        if args.model:
            images = [image for image in images if image.labels.get(f"{LABEL}.name") == args.model]
        _prune(client, images, args.keep, args.dry_run, logger)
        return 0
    rows = [
        [
            ", ".join(image.tags) or image.short_id,
            image.labels.get(f"{LABEL}.name", ""),
            image.labels.get(f"{LABEL}.framework-version", ""),
            image.labels.get(f"{LABEL}.base-image", ""),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(_created(image))),
            f"{image.attrs.get('Size', 0) / 1e9:.2f} GB",
        ]
        for image in images
    ]
    if not rows:
        logger.info("no tftrain images")
        return 0
    logger.table("tftrain images", ["image", "model", "framework", "base", "created", "size"], rows)
    return 0


def _prune(client, images, keep: int, dry_run: bool, logger) -> None:
    in_use = {container.image.id for container in client.containers.list(all=True)}
    seen: dict[str, int] = {}
    removed = 0
    for image in images:  # newest first
        model = image.labels.get(f"{LABEL}.name", "")
        seen[model] = seen.get(model, 0) + 1
        if seen[model] <= keep or image.id in in_use:
            continue
        label = ", ".join(image.tags) or image.short_id
        if dry_run:
            logger.info(f"would remove {label}")
        else:
            client.images.remove(image.id, force=False)
            logger.info(f"removed {label}")
        removed += 1
    logger.info(f"{removed} image(s) {'to remove' if dry_run else 'removed'}; kept the newest {keep} per model")


def _created(image) -> float:
    from datetime import datetime

    created = image.attrs.get("Created", "")
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")[:26] + "+00:00").timestamp()
    except ValueError:
        return 0.0
