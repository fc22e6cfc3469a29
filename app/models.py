"""Imports every domain's models so Base.metadata is complete (for Alembic and for tests)."""


def load_all_models() -> None:
    import app.accounts.models
    import app.accounts.secret
    import app.coordination.lives
    import app.memories.models
    import app.oauth.models
    import app.portability.models
    import app.projects.models
    import app.sync.models
    import app.teams.models
    import app.web.models  # noqa: F401
