"""Azure ML's private registries and user-managed environments: ContainerRegistry (an estimator's
image_registry_details, an Environment's docker.base_image_registry or from_docker_image's
container_registry) → image_registry; user_managed / user_managed_dependencies → user_managed.

The password is never written: the manifest names a `secrets:` entry and a TODO says which
variable to set. A literal password in the script is also taken out of the source lines the
manifest quotes at its top."""

from __future__ import annotations

from typing import Any

from runner.importer.draft import TODO
from runner.importer.values import Obj
from runner.manifest.images import PACKAGE_KEYS

PASSWORD_VARIABLE = "REGISTRY_PASSWORD"
REDACTED = "<password: see image_registry.password_secret>"


def put_registry(ctx, registry: Any, at: Any) -> None:
    draft, where = ctx.draft, ctx.where(at)
    if not isinstance(registry, Obj):
        ctx.unresolved(("image_registry", "address"), registry, at)
        return
    attrs = registry.attrs
    for key in ("address", "username"):
        value = attrs.get(key)
        if isinstance(value, str) and value:
            draft.put(("image_registry", key), value)
        else:
            draft.todo(("image_registry", key), f"the registry's {key} (not known statically)", where=where)
    password = attrs.get("password")
    if isinstance(password, str) and password:
        draft.header = [line.replace(password, REDACTED) for line in draft.header]
        draft.note(
            "todo",
            "image_registry: the script holds the registry's password in clear text: change it, keep it in a secret",
            where,
        )
    draft.put(
        ("image_registry", "password_secret"),
        PASSWORD_VARIABLE,
        f"{TODO}: set {PASSWORD_VARIABLE} in tftrain's environment (a repository secret) to the registry's password",
    )
    draft.note(
        "todo",
        f"image_registry.password_secret: set {PASSWORD_VARIABLE} to the registry's password when tftrain runs",
        where,
    )
    secrets = draft.get("secrets") or []
    if PASSWORD_VARIABLE not in secrets:
        draft.put("secrets", [*secrets, PASSWORD_VARIABLE])


def put_user_managed(ctx, at: Any) -> None:
    ctx.draft.put("user_managed", True, "the image (or interpreter) as it is: tftrain installs nothing")
    ctx.draft.note(
        "changed",
        "user_managed: TensorFlow must already be installed there; tftrain checks it imports before the run",
        ctx.where(at),
    )


def drop_packages(ctx) -> None:
    """With user_managed, Azure ML installed none of the packages listed beside it; neither does tftrain."""
    if ctx.draft.get("user_managed") is not True:
        return
    for key in PACKAGE_KEYS:
        if key in ctx.draft.keys:
            del ctx.draft.keys[key]
            ctx.draft.note("dropped", f"{key}: user_managed installs nothing (nor did Azure ML)")
