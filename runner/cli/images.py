"""tftrain images [prune]: the images tftrain built — training images (labelled tftrain.content-hash),
serving images (tftrain.serving.content-hash) and the serving environments they are built on
(tftrain.serving.environment)."""

from __future__ import annotations

import time

from runner.environments import LABEL, docker_client
from runner.errors import UsageError
from runner.serving.image import LABEL as SERVING

HASH_LABEL = f"{LABEL}.content-hash"
SERVING_HASH_LABEL = f"{SERVING}.content-hash"
ENVIRONMENT_LABEL = f"{SERVING}.environment"
SERVING_ENVIRONMENT = "serving environment"


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="images_command")
    prune = sub.add_parser("prune", help="remove all but the newest images of each model (and serving environments)")
    prune.add_argument(
        "--keep",
        type=int,
        default=1,
        help="newest images to keep per model and kind, and serving environments (default 1)",
    )
    prune.add_argument("--model", help="only this model's images")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be removed")


def run(args, logger) -> int:
    client = docker_client()
    found = {
        image.id: image
        for label in (HASH_LABEL, SERVING_HASH_LABEL, ENVIRONMENT_LABEL)
        for image in client.images.list(filters={"label": label})
    }
    images = sorted(found.values(), key=_created, reverse=True)
    if args.images_command == "prune":
        if args.keep < 1:
            raise UsageError("--keep: at least 1 (the newest image of each model stays)")
        if args.model:
            images = [image for image in images if _model(image) == args.model]
        _prune(client, images, args.keep, args.dry_run, logger)
        return 0
    rows = [
        [
            ", ".join(image.tags) or image.short_id,
            _kind(image),
            _model(image),
            image.labels.get(f"{LABEL}.framework-version", ""),
            image.labels.get(f"{LABEL}.base-image") or image.labels.get(f"{SERVING}.base-image", ""),
            time.strftime("%Y-%m-%d %H:%M", time.localtime(_created(image))),
            f"{image.attrs.get('Size', 0) / 1e9:.2f} GB",
        ]
        for image in images
    ]
    if not rows:
        logger.info("no tftrain images")
        return 0
    logger.table("tftrain images", ["image", "kind", "model", "framework", "base", "created", "size"], rows)
    return 0


def _kind(image) -> str:
    if HASH_LABEL in image.labels:
        return "training"
    return "serving" if SERVING_HASH_LABEL in image.labels else SERVING_ENVIRONMENT


def _model(image) -> str:
    return image.labels.get(f"{LABEL}.name") or image.labels.get(f"{LABEL}.model.name", "")


def _prune(client, images, keep: int, dry_run: bool, logger) -> None:
    """Newest first within each (kind, model); the images built on a serving environment go before
    it, so that an environment nothing is built on any more can go in the same pass."""
    from docker.errors import APIError

    in_use = {container.image.id for container in client.containers.list(all=True)}
    seen: dict[tuple[str, str], int] = {}
    removed = 0
    for image in sorted(images, key=lambda image: _kind(image) == SERVING_ENVIRONMENT):  # stable: still newest first
        group = (_kind(image), _model(image))
        seen[group] = seen.get(group, 0) + 1
        if seen[group] <= keep or image.id in in_use:
            continue
        label = ", ".join(image.tags) or image.short_id
        if dry_run:
            logger.info(f"would remove {label}")
            removed += 1
            continue
        try:
            client.images.remove(image.id, force=False)
        except APIError as exc:  # 409: a container or an image built on it still needs it
            logger.warning(f"kept {label}: {exc.explanation or exc}")
            continue
        logger.info(f"removed {label}")
        removed += 1
    logger.info(
        f"{removed} image(s) {'to remove' if dry_run else 'removed'}; kept the newest {keep} per model and kind"
    )


def _created(image) -> float:
    from datetime import datetime

    created = image.attrs.get("Created", "")
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")[:26] + "+00:00").timestamp()
    except ValueError:
        return 0.0
