"""How a command that takes a version reference (`tftrain serve`, `tftrain replay`) reaches the
repository's releases for a release:REF: the repository from the settings (GITHUB_REPOSITORY and
a token), and GitHub's failures as one line. Not a subcommand: what those commands share."""

from __future__ import annotations

import contextlib
import os


def release_errors(ref: str):
    """GitHub's failures as one ServiceError line while a release:REF is fetched; nothing otherwise."""
    from runner.serving.refs import RELEASE_PREFIX

    if not ref.startswith(RELEASE_PREFIX):
        return contextlib.nullcontext()
    from runner.github import workflow

    return workflow.github_errors()


def github_repo(args):
    """(the PyGithub repository, the settings) of this workflow run, for runner.serving.refs."""
    from runner.github import workflow
    from runner.settings import resolve

    settings = resolve(os.environ, args)
    return workflow.client(settings.github).get_repo(settings.github.repository), settings
