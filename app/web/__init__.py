"""Server-rendered pages: signup, login, the dashboard."""
