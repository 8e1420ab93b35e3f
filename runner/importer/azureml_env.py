"""The SDK v1 job's environment: TensorFlow version, GPU, docker, packages, variables."""

from __future__ import annotations

from typing import Any

from runner.importer.container_registry import drop_packages, put_registry, put_user_managed
from runner.importer.draft import curated_environment
from runner.importer.mapping import put_count, put_size, put_variables
from runner.importer.packages import add_packages, environment_file
from runner.importer.values import Obj

HANDLED = {
    "framework_version", "use_gpu", "use_docker", "custom_docker_image", "custom_docker_base_image", "pip_packages",
    "conda_packages", "pip_requirements_file", "conda_dependencies_file", "pip_requirements_file_path",
    "conda_dependencies_file_path", "environment_variables", "environment_definition", "environment", "shm_size",
    "max_run_duration_seconds", "resume_from", "image_registry_details", "user_managed",
}  # fmt: skip


def environment(ctx, job: Obj) -> None:
    attrs, draft = job.attrs, ctx.draft
    version = attrs.get("framework_version")
    if isinstance(version, (str, float)) and not isinstance(version, bool):
        draft.put("framework_version", str(version))
    elif version is not None:
        ctx.unresolved("framework_version", version, job.line)
    for key in ("use_gpu", "use_docker"):
        if isinstance(attrs.get(key), bool):
            draft.put(key, attrs[key])
        elif key in attrs:
            ctx.unresolved(key, attrs[key], job.line)
    image = attrs.get("custom_docker_image", attrs.get("custom_docker_base_image"))
    if image is not None:
        _image(ctx, image, job.line)
    if "image_registry_details" in attrs:
        put_registry(ctx, attrs["image_registry_details"], attrs["_lines"].get("image_registry_details", job.line))
    if attrs.get("user_managed") is True:
        put_user_managed(ctx, attrs["_lines"].get("user_managed", job.line))
    for key in ("pip_packages", "conda_packages"):
        if key in attrs:
            packages(ctx, key, attrs[key], attrs["_lines"].get(key, job.line))
    for key in ("pip_requirements_file", "conda_dependencies_file"):  # relative to source_directory
        if isinstance(attrs.get(key), str):
            environment_file(ctx, key, attrs[key], ctx.at(job, key), base=ctx.source_dir())
        elif key in attrs:
            ctx.unresolved(key, attrs[key], job.line)
        if isinstance(attrs.get(key + "_path"), str):  # the deprecated *_path: relative to the script
            environment_file(ctx, key, attrs[key + "_path"], ctx.at(job, key + "_path"))
    if "max_run_duration_seconds" in attrs:
        put_count(ctx, "max_run_duration_seconds", attrs["max_run_duration_seconds"], job.line, placeholder=None)
    put_size(ctx, "shm_size", attrs.get("shm_size"), job.line)
    if "resume_from" in attrs:
        draft.note(
            "todo",
            f"resume_from={ctx.shown(attrs['resume_from'])}: set resume_from to model:NAME@latest, a run id or a path",
            ctx.at(job, "resume_from"),
        )
    variables(ctx, attrs.get("environment_variables"), job.line)
    run_config = attrs.get("run_config")
    env = attrs.get("environment_definition", attrs.get("environment"))
    if env is None and isinstance(run_config, Obj):
        env = run_config.attrs.get("environment")
        variables(ctx, run_config.attrs.get("environment_variables"), job.line)
    if isinstance(env, Obj):
        _environment(ctx, env)
    elif env is not None:
        ctx.draft.note(
            "todo",
            f"environment {ctx.shown(env)} is not known statically: check framework_version and packages",
            ctx.where(job.line),
        )
    drop_packages(ctx)


def packages(ctx, key: str, value: Any, line: int) -> None:
    if isinstance(value, list):
        known, unknown = [], []
        for item in value:
            (known if isinstance(item, str) else unknown).append(item)
        where = ctx.where(ctx.line_of(unknown[0] if unknown else None, line))
        add_packages(ctx.draft, key, known, where, tuple(ctx.shown(item) for item in unknown))
    elif value is not None:
        ctx.unresolved(key, value, line)


def variables(ctx, value: Any, line: int) -> None:
    put_variables(ctx, value.attrs if isinstance(value, Obj) else value, line)


def _image(ctx, image: Any, line: int) -> None:
    if isinstance(image, str):
        ctx.draft.put("custom_docker_image", image)
        ctx.draft.put("use_docker", True)
        if image.startswith("mcr.microsoft.com/azureml/"):
            ctx.draft.note(
                "info",
                f"custom_docker_image: {image!r} is an Azure ML base image; without it tftrain uses"
                " tensorflow/tensorflow",
            )
    else:
        ctx.unresolved("custom_docker_image", image, line)


def _environment(ctx, env: Obj) -> None:
    attrs, where, via = env.attrs, ctx.where(env.line), env.via
    if via == "Environment.get" and isinstance(attrs.get("name"), str):
        curated_environment(ctx.draft, attrs["name"], where)
    elif via == "Environment.from_conda_specification":
        environment_file(ctx, "conda_dependencies_file", attrs.get("file_path"), where)
    elif via == "Environment.from_pip_requirements":
        environment_file(ctx, "pip_requirements_file", attrs.get("file_path"), where)
    elif via == "Environment.from_docker_image":
        _image(ctx, attrs.get("image"), env.line)
        if attrs.get("container_registry") is not None:
            put_registry(ctx, attrs["container_registry"], env.line)
        for key, arg in (
            ("conda_dependencies_file", "conda_specification"),
            ("pip_requirements_file", "pip_requirements"),
        ):
            if arg in attrs:
                environment_file(ctx, key, attrs[arg], where)
    elif via != "Environment":
        ctx.draft.note("todo", f"{via}(...): no equivalent; set custom_docker_image or the package keys by hand", where)
    docker = attrs.get("docker")
    if isinstance(docker, Obj):
        if "base_image" in docker.attrs:
            _image(ctx, docker.attrs["base_image"], env.line)
        if (
            isinstance(docker.attrs.get("base_image_registry"), Obj)
            and "address" in docker.attrs["base_image_registry"].attrs
        ):
            put_registry(ctx, docker.attrs["base_image_registry"], env.line)
        if docker.attrs.get("enabled") is True:
            ctx.draft.put("use_docker", True)
        if "base_dockerfile" in docker.attrs:
            ctx.draft.note(
                "todo", "env.docker.base_dockerfile: build the image yourself and set custom_docker_image", where
            )
    python = attrs.get("python")
    if isinstance(python, Obj):
        conda = python.attrs.get("conda_dependencies")
        if isinstance(conda, Obj):
            _conda(ctx, conda)
        if python.attrs.get("user_managed_dependencies") is True:
            put_user_managed(ctx, env.line)
    variables(ctx, attrs.get("environment_variables"), env.line)


def _conda(ctx, conda: Obj) -> None:
    where = ctx.where(conda.line)
    if conda.via == "CondaDependencies" and "conda_dependencies_file_path" in conda.attrs:
        environment_file(ctx, "conda_dependencies_file", conda.attrs["conda_dependencies_file_path"], where)
    for key in ("pip_packages", "conda_packages"):
        if key in conda.attrs:
            packages(ctx, key, conda.attrs[key], conda.line)
    if "python_version" in conda.attrs:
        ctx.draft.note(
            "dropped", f"python_version={ctx.shown(conda.attrs['python_version'])}: tftrain uses its own Python", where
        )
