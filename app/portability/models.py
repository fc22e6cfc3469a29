"""What a deleted account leaves behind: the digests of its sync credentials, and nothing that names it."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, utcnow


class ErasedCredential(Base):
    """SHA-256 of a credential (an access or refresh token's stored digest, a client id) of a deleted account.

    A linked machine presenting it hears 410 ``account_deleted`` and stops, rather than retrying a 401 for ever.
    The digest of a random token tells nothing about whose it was."""

    __tablename__ = "erased_credentials"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    erased_at: Mapped[datetime] = mapped_column(default=utcnow)
