"""Command-line interface (placeholder; built out in the pipeline slice)."""

import typer

app = typer.Typer(help="carbonsched: carbon- and power-aware geo-distributed scheduler.")


@app.command()
def version() -> None:
    """Print the version."""
    from importlib.metadata import version as v

    typer.echo(v("carbonsched"))


def main() -> None:
    """Entry point of the ``carbonsched`` console script."""
    app()
