"""Alembic environment: runs migrations on the connection handed over by carbonsched.store."""

from alembic import context

from carbonsched.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run migrations on ``config.attributes['connection']``."""
    connection = config.attributes["connection"]
    # the store counts the revisions applied, to name the one that failed
    on_apply = config.attributes.get("on_version_apply")
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite",
                      on_version_apply=[on_apply] if on_apply else [])
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
