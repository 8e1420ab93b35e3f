"""The repository itself: what is tracked is source, not build output."""

from __future__ import annotations

