"""Build the training image with the docker SDK, unless an image with its content tag exists."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from runner.environments.daemon import docker_errors
from runner.environments.images import ImageSpec
from runner.errors import BuildError, DockerError, one_line
from runner.history.checksums import sha256_file
from runner.telemetry.logger import Logger
from runner.telemetry.tee import Tee


def base_image_id(client, base: str, logger: Logger, auth: dict[str, str] | None = None) -> str:
    """`auth`: image_registry's credentials, for a private image (see daemon.py)."""
    import docker

    try:
        return client.images.get(base).id
    except docker.errors.ImageNotFound:
        pass
    logger.info(f"pulling base image {base}")
    try:
        return client.images.pull(base, auth_config=auth).id
    except docker.errors.APIError as exc:
        raise DockerError(
            f"base image {base} is not on this machine and cannot be pulled ({exc.explanation or exc}); "
            "set custom_docker_image to an image the daemon has"
        ) from None


def existing_image(client, tag: str) -> str | None:
    import docker

    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        return None


def build_image(client, spec: ImageSpec, logger: Logger, log_path: Path) -> str:
    logger.info(f"building image {spec.tag} from {spec.base_image} (log: {log_path})")
    return _build(client, _tar(spec.context()), spec.tag, spec.labels, spec.dockerfile, logger, log_path)


def build_code_image(client, base_tag: str, trees: dict[str, Path], tag: str, logger: Logger, log_path: Path) -> str:
    """FROM the training image, plus directories copied in (the snapshot, tftrain's runner): for
    clusters, where nothing can be mounted from this machine."""
    dockerfile = f"FROM {base_tag}\n" + "".join(
        f"COPY {name} {target}\n" for name, target in sorted(_TREE_TARGETS.items()) if name in trees
    )
    logger.info(f"building code image {tag}")
    return _build(client, _tar({"Dockerfile": dockerfile.encode()}, trees), tag, {}, dockerfile, logger, log_path)


_TREE_TARGETS = {"workspace": "/workspace", "runner": "/tftrain/python/runner"}


def trees_digest(trees: dict[str, Path]) -> str:
    """sha256 over what build_code_image copies from `trees`, names and contents, caches left out
    as the build context leaves them out: the code image's tag changes with any of them (the
    snapshot, or tftrain's runner after an upgrade), and not with a fresh __pycache__."""
    digest = hashlib.sha256()
    for name, root in sorted(trees.items()):
        files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.relative_to(root).parts)
        for path in files:
            digest.update(f"{sha256_file(path)}  {name}/{path.relative_to(root).as_posix()}\n".encode())
    return digest.hexdigest()


def push_image(client, tag: str, logger: Logger) -> None:
    repository, _, version = tag.rpartition(":")
    logger.info(f"pushing {tag}")
    with docker_errors(f"pushing {tag}"):
        for chunk in client.api.push(repository, tag=version, stream=True, decode=True):
            if "error" in chunk:  # the registry refused: the daemon says how, with its status when it had one
                raise DockerError(f"registry: pushing {tag} failed: {one_line(chunk['error'])}")


def _build(client, context: io.BytesIO, tag: str, labels: dict, dockerfile: str, logger: Logger, log_path: Path) -> str:
    step, error = None, None
    with Tee(log_path, logger, f"--- Dockerfile for {tag}\n{dockerfile}--- build\n") as tee:
        chunks = client.api.build(
            fileobj=context,
            custom_context=True,
            tag=tag,
            labels=labels,
            network_mode="host",
            rm=True,
            forcerm=True,
            decode=True,
        )
        for chunk in chunks:
            text = chunk.get("stream") or ""
            if "error" in chunk:
                error = chunk["error"]
                text = error + "\n"
            if text:  # the daemon colours a step's stderr: the tee takes the colours out
                step = next((line for line in reversed(tee.write(text)) if line.startswith("Step ")), step)
    if error is not None:
        raise BuildError(_build_failure(step, error, tee.tail, log_path))
    image_id = existing_image(client, tag)
    if image_id is None:
        raise BuildError(f"docker build reported success but {tag} does not exist (log: {log_path})")
    return image_id


def _build_failure(step: str | None, error: str, tail, log_path: Path) -> str:
    lines = [
        line for line in tail if line != error.strip() and not line.startswith(("Removing intermediate", " ---> "))
    ]
    cause = next(
        (line.strip() for line in reversed(lines) if line.lstrip().startswith(("ERROR", "E:", "tftrain:"))), None
    )
    cause = cause or (lines[-1].strip() if lines else error.strip())
    where = step or "the first step"
    return f"docker build failed at {where}: {cause} (full log: {log_path})"


def _tar(files: dict[str, bytes], trees: dict[str, Path] | None = None) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
        for name, root in sorted((trees or {}).items()):
            archive.add(str(root), arcname=name, filter=_no_caches)
    buffer.seek(0)
    return buffer


def _no_caches(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in info.name.split("/") else info
