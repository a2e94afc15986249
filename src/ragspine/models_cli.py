"""`ragspine models list | pull NAME | verify [NAME] | remove NAME`: the models named by hub id,
kept in the Hugging Face cache (docs/models.md).

Imports only click and the CLI's shared options at module load. `pull` draws huggingface_hub's
own progress bars; every command says where the cache is; `list` says which setting uses each
model (from the environment and `--config`); `verify` re-hashes every cached file against its
blob's name and exits 1 on a mismatch, and runs the int8 parity check again where a snapshot
holds an int8 graph with its float graph; errors are one line, exit 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ragspine.cli_common import config_option, user_errors
from ragspine.models.resolve import SLOTS

if TYPE_CHECKING:
    from ragspine.settings.config import Settings



def _size(n: int) -> str:
    """Bytes in a short human form.

    >>> _size(1536), _size(90_000_000)
    ('1.5 KiB', '85.8 MiB')
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def configured_models(settings: Settings | None) -> dict[str, str]:
    """{hub repo id: the setting that names it} for the settings in force (defaults included)."""
    from ragspine.models.hub import parse_hub_ref
    from ragspine.models.known import DEFAULT_CROSS_ENCODER

    if settings is None:
        return {}
    named = {"RAGSPINE_RERANKER_MODEL": settings.reranker_model, "RAGSPINE_EMBEDDING_MODEL": settings.embedding_model,
             "RAGSPINE_VISUAL_MODEL": settings.visual_model}  # fmt: skip
    if settings.reranker in ("cross_encoder", "ce") and not settings.reranker_model:
        named["RAGSPINE_RERANKER_MODEL"] = DEFAULT_CROSS_ENCODER
    out = {}
    for setting, value in named.items():
        ref = parse_hub_ref(value) if value and not Path(value).is_dir() else None
        if ref is not None:
            out[ref.repo_id] = setting
    return out


def _settings(config_file: Path | None) -> Settings | None:
    from ragspine.assembly import load_settings

    with user_errors():
        return load_settings(config_file=config_file)


def _slot_for(setting: str, settings: Settings | None) -> str:
    """The files a model needs, from the setting naming it (SPLADE when the reranker is splade)."""
    if setting == "RAGSPINE_VISUAL_MODEL":
        return "visual"
    splade = setting == "RAGSPINE_RERANKER_MODEL" and settings is not None and settings.reranker == "splade"
    return "splade" if splade else "onnx"


@click.group("models")
def models() -> None:
    """Models named by hub id: list, pull, verify and remove them (the Hugging Face cache)."""


@models.command("list")
@config_option
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def list_command(config_file: Path | None, as_json: bool) -> None:
    """The cached models (size, revisions, folder) and the configured ones not pulled yet."""
    from ragspine.models.hub import cached_models, hub_cache
    from ragspine.models.known import setting_of

    used = configured_models(_settings(config_file))
    rows = [{"model": m.repo_id, "size": m.size, "revisions": list(m.revisions), "folder": str(m.folder),
             "setting": used.get(m.repo_id) or setting_of(m.repo_id), "pulled": True}
            for m in cached_models()]  # fmt: skip
    cached = {row["model"] for row in rows}
    rows += [{"model": repo, "size": 0, "revisions": [], "folder": "", "setting": setting, "pulled": False}
             for repo, setting in used.items() if repo not in cached]  # fmt: skip
    if as_json:
        click.echo(json.dumps({"cache": str(hub_cache()), "models": rows}, indent=2))
        return
    click.echo(f"cache: {hub_cache()}")
    for row in rows:
        state = _size(int(row["size"])) if row["pulled"] else "not pulled"  # type: ignore[call-overload]
        click.echo(f"{row['model']:<48} {state:>11}  {row['setting'] or '-':<26} {row['folder']}")
    if not rows:
        click.echo("no models cached; `ragspine models pull NAME` fetches one", err=True)


@models.command("pull")
@click.argument("name")
@click.option("--slot", type=click.Choice(SLOTS), default=None,
              help="The files to fetch: onnx (graph + tokenizer), splade, visual; default from the setting naming it.")
@click.option("--fp32", is_flag=True, help="Fetch the fp32 ONNX graph even where the repo offers int8.")
@config_option
def pull_command(name: str, slot: str | None, fp32: bool, config_file: Path | None) -> None:
    """Fetch NAME (ORG/NAME[@REVISION]) into the cache, with progress bars, and check it."""
    from ragspine.models.hub import hub_offline, parse_hub_ref
    from ragspine.models.resolve import resolve_model

    ref = parse_hub_ref(name)
    if ref is None:
        raise click.ClickException(f"{name!r} is not a hub id: ORG/NAME or ORG/NAME@REVISION")
    if hub_offline():
        raise click.ClickException(f"cannot pull {ref.name}: HF_HUB_OFFLINE is set; unset it where the hub is reachable")
    settings = _settings(config_file)
    setting = configured_models(settings).get(ref.repo_id, "")
    chosen = slot or _slot_for(setting, settings)
    with _model_errors():
        model = resolve_model(ref.name, slot=chosen, what="ragspine models pull", setting=setting or "--slot",
                              int8=not fp32)  # fmt: skip
    files = sorted(p for p in model.folder.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in files)
    click.echo(f"{ref.name}: {len(files)} files, {_size(total)} in {model.folder}")
    if model.onnx is not None:
        click.echo(f"onnx graph: {model.onnx.relative_to(model.folder)}")
    click.echo(f"used by: {setting or f'set RAGSPINE_RERANKER_MODEL / _EMBEDDING_MODEL / _VISUAL_MODEL={ref.name}'}")


@models.command("verify")
@click.argument("name", required=False)
def verify_command(name: str | None) -> None:
    """Re-hash every cached file (or NAME's) against the hub's checksum; exit 1 on a mismatch."""
    from ragspine.models.hub import blob_ok, cached_models, hub_cache, parse_hub_ref, snapshot_files

    ref = parse_hub_ref(name) if name is not None else None
    if name is not None and ref is None:
        raise click.ClickException(f"{name!r} is not a hub id (ORG/NAME, ORG/NAME@REVISION or hub:ORG/NAME)")
    chosen = [m for m in cached_models() if ref is None or m.repo_id == ref.repo_id]
    if name is not None and not chosen:
        raise click.ClickException(f"{name!r} is not in the model cache {str(hub_cache())!r}")
    bad = 0
    for model in chosen:
        for snapshot in sorted((model.folder / "snapshots").iterdir()):
            files = snapshot_files(snapshot)
            damaged = [str(p.relative_to(snapshot)) for p in files if not blob_ok(p)]
            bad += len(damaged)
            status = f"damaged: {', '.join(damaged)}" if damaged else "ok"
            parity = _parity(snapshot, model.repo_id)
            click.echo(f"{model.repo_id}@{snapshot.name[:12]}  {len(files)} files  {status}{parity}")
    click.echo(f"{len(chosen)} models checked in {hub_cache()}, {bad} damaged files", err=True)
    if bad:
        raise SystemExit(1)


def _parity(snapshot: Path, name: str) -> str:
    """The int8 parity check of a snapshot holding an int8 graph and the float one beside it, run
    again (`ragspine.models.parity`): "" when there is no such pair or nothing to run it with."""
    from ragspine.models.parity import PARITY_MIN_COSINE, checked_int8
    from ragspine.models.resolve import int8_pair

    pair = int8_pair(snapshot)
    if pair is None or not (snapshot / "tokenizer.json").is_file():
        return ""
    graph, fp32 = pair
    try:
        parity = checked_int8(snapshot.parent.parent, snapshot / graph, snapshot / fp32, snapshot / "tokenizer.json",
                              name=name, again=True)  # fmt: skip
    except (ImportError, ValueError) as exc:
        return f"  int8 parity not checked ({exc})"
    verdict = "ok" if parity.ok else f"below {PARITY_MIN_COSINE}: the float graph {fp32} is used"
    return f"  int8 parity {graph} vs {fp32}: cosine {parity.cosine:.4f} {verdict}"


@models.command("remove")
@click.argument("name")
def remove_command(name: str) -> None:
    """Delete NAME (every revision) from the cache."""
    from ragspine.models.hub import hub_cache, parse_hub_ref, remove_model

    ref = parse_hub_ref(name)
    if ref is None:
        raise click.ClickException(f"{name!r} is not a hub id: ORG/NAME")
    freed = remove_model(ref)
    if not freed:
        raise click.ClickException(f"{ref.repo_id!r} is not in the model cache {str(hub_cache())!r}")
    click.echo(f"removed {ref.repo_id}: {_size(freed)} freed from {hub_cache()}")


@contextmanager
def _model_errors() -> Iterator[None]:
    """The resolver's errors (not pulled, damaged, missing, gated, no extra) as one line, exit 1."""
    from ragspine.errors import RagspineError

    try:
        yield
    except (RagspineError, FileNotFoundError, PermissionError, ValueError, ImportError) as exc:
        raise click.ClickException(str(exc)) from exc
