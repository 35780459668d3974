"""The preset boards: one TOML file per preset in this directory, named <preset>.toml.

Installed with the package (package data), so presets resolve the same from a checkout and
from an installed wheel.
"""
from __future__ import annotations

import pathlib

PRESETS_DIR = pathlib.Path(__file__).resolve().parent
DEFAULT_PRESET = "hccs8"


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


def preset_path(name: str) -> pathlib.Path:
    path = PRESETS_DIR / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"unknown preset {name!r} (presets: {', '.join(list_presets())})")
    return path


def default_preset() -> str:
    """The 8-device HCCS full-mesh board, the emulator's default topology."""
    return DEFAULT_PRESET
