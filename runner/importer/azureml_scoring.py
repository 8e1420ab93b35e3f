"""An SDK v1 deployment (`Model.deploy(ws, NAME, [model], InferenceConfig(...), AciWebservice.
deploy_configuration(...))`) → model.serving: the entry script and its environment's conda file,
cpu_cores/memory_gb/auth_enabled; the service's name, tags, replicas and Azure-only settings go to
the report (runner/serving/scoring* serves the script; docs/azureml.md)."""

from __future__ import annotations

from typing import Any

from runner.importer.values import Obj

SERVING = ("model", "serving")
MAPPED = {"cpu_cores": "cpu", "memory_gb": "memory", "auth_enabled": "auth"}


def deployment(ctx) -> None:
    deployments = ctx.interp.deployments
    if not deployments:
        return
    deploy = deployments[-1]
    for other in deployments[:-1]:
        ctx.draft.note("dropped", "another Model.deploy(...): one scoring script per model", ctx.where(other.line))
    name = deploy.attrs.get("name")
    if isinstance(name, str):
        ctx.draft.note(
            "dropped",
            f"Model.deploy(name={name!r}): the service's name is tftrain deploy's --service-name (Kubernetes)",
            ctx.at(deploy, "name"),
        )
    inference = deploy.attrs.get("inference_config")
    if isinstance(inference, Obj) and inference.kind == "InferenceConfig":
        _inference(ctx, inference)
    elif inference is not None:
        ctx.unresolved(SERVING + ("scoring_script",), inference, deploy.line)
    config = deploy.attrs.get("deployment_config")
    if isinstance(config, Obj) and config.kind == "deployment_config":
        _resources(ctx, config)


def _inference(ctx, config: Obj) -> None:
    script, folder = config.attrs.get("entry_script"), config.attrs.get("source_directory")
    if isinstance(script, str):
        nested = isinstance(folder, str) and folder not in (".", "./")
        path = f"{folder.rstrip('/')}/{script}" if nested else script
        ctx.draft.put(
            SERVING + ("scoring_script",),
            path,
            "InferenceConfig(entry_script=...): served on azmlinfsrv by tftrain serve/deploy",
        )
        if nested:
            ctx.draft.note(
                "changed",
                f"model.serving.scoring_script: InferenceConfig(source_directory={folder!r}) → {path!r}, "
                "relative to source_directory (only the script is copied into the version)",
                ctx.at(config, "source_directory"),
            )
    elif script is not None:
        ctx.unresolved(SERVING + ("scoring_script",), script, config.line, placeholder="score.py")
    conda = config.attrs.get("conda_file")
    environment = config.attrs.get("environment")
    if isinstance(environment, Obj) and isinstance(environment.attrs.get("file_path"), str):
        via = environment.attrs.get("_via", "Environment")
        if via == "Environment.from_conda_specification":
            conda = environment.attrs["file_path"]
        else:
            ctx.draft.note(
                "todo",
                f"model.serving.pip_packages: the scoring environment came from {via}(...): list its packages",
                ctx.at(config, "environment"),
            )
    elif isinstance(environment, Obj):
        ctx.draft.note(
            "info",
            f"InferenceConfig(environment={ctx.shown(environment)}): the scoring environment is the model's "
            "TensorFlow set + azmlinfsrv; add the script's own packages to model.serving.pip_packages",
            ctx.at(config, "environment"),
        )
    if isinstance(conda, str):
        ctx.draft.put(SERVING + ("conda_file",), conda, "its pip list is installed beside the model's TensorFlow set")
    for key in (
        "runtime",
        "extra_docker_file_steps",
        "enable_gpu",
        "base_image",
        "base_image_registry",
        "cuda_version",
        "description",
    ):
        if key in config.attrs:
            ctx.draft.note(
                "dropped",
                f"InferenceConfig({key}={ctx.shown(config.attrs[key])}): no equivalent (the serving image is "
                "tftrain's: the model's TensorFlow set + azmlinfsrv)",
                ctx.at(config, key),
            )


def _resources(ctx, config: Obj) -> None:
    attrs = config.attrs
    if attrs.get("_via") == "AksWebservice.deploy_configuration" and "auth_enabled" not in attrs:
        ctx.draft.put(SERVING + ("auth",), True, "AksWebservice: auth_enabled defaults to True")
    for azure, key in MAPPED.items():
        value = attrs.get(azure)
        if value is None:
            continue
        mapped = _value(key, value)
        if mapped is None:
            ctx.unresolved(SERVING + (key,), value, config.line)
        else:
            ctx.draft.put(
                SERVING + (key,),
                mapped,
                f"{attrs.get('_via', 'deploy_configuration').split('.')[0]}: {azure}={value!r}",
            )
    for key, value in attrs.items():
        if key in MAPPED or key.startswith("_") or key == "*":
            continue
        what = "tags and properties label Azure's service" if key in ("tags", "properties") else "no equivalent"
        ctx.draft.note(
            "dropped",
            f"{attrs.get('_via', 'deploy_configuration')}({key}={ctx.shown(value)}): {what}",
            ctx.at(config, key),
        )


def _value(key: str, value: Any) -> Any:
    if key == "auth":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    if key == "cpu":
        return value
    mebibytes = round(value * 1024)
    return f"{mebibytes // 1024}Gi" if mebibytes % 1024 == 0 else f"{mebibytes}Mi"
