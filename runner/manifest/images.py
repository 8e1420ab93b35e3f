"""Where the training's image and interpreter come from, past what tftrain builds itself: a
private registry (`image_registry`) and environments the user manages (`user_managed`, `python`).

Azure ML's estimator names them image_registry_details and user_managed."""

from __future__ import annotations

from pydantic import Field

from runner.manifest.fields import ENV_NAME_PATTERN, Model

PACKAGE_KEYS = ("pip_packages", "conda_packages", "pip_requirements_file", "conda_dependencies_file")


class ImageRegistry(Model):
    """Credentials for the registry that holds custom_docker_image; the password never appears in
    the manifest, only the name of the `secrets:` entry that holds it."""

    address: str = Field(
        min_length=1,
        pattern=r"^[A-Za-z0-9.-]+(:\d{1,5})?(/[^\s]*)?$",
        description="The registry, e.g. registry.example.com:5000",
    )
    username: str = Field(min_length=1, description="The user tftrain logs in as")
    password_secret: str = Field(
        pattern=ENV_NAME_PATTERN,
        description="The entry of `secrets:` (a variable of tftrain's environment) that holds the password",
    )

    @property
    def host(self) -> str:
        """The registry's host[:port], as docker login and an image pull secret take it."""
        return self.address.split("://", 1)[-1].split("/", 1)[0]
