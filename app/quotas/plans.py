"""Plans: how many requests per minute and how many stored memories a user (and each of their keys) may have."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import ValidationFailed


@dataclass(frozen=True, slots=True)
class Plan:
    name: str
    requests_per_minute: int
    key_requests_per_minute: int
    max_memories: int
    # A tenant's share of a busy server against other tenants' (app.admission): weight 2 gets twice the turns.
    weight: int = 1


def parse_plans(raw: dict[str, dict[str, int]], default: str) -> dict[str, Plan]:
    """Validate the configured plans; the default plan must exist."""
    plans: dict[str, Plan] = {}
    for name, limits in raw.items():
        try:
            plan = Plan(
                name=name,
                requests_per_minute=int(limits["requests_per_minute"]),
                key_requests_per_minute=int(limits.get("key_requests_per_minute", limits["requests_per_minute"])),
                max_memories=int(limits["max_memories"]),
                weight=int(limits.get("weight", 1)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationFailed(f"plan {name!r} needs requests_per_minute and max_memories: {exc}") from exc
        if min(plan.requests_per_minute, plan.key_requests_per_minute, plan.max_memories, plan.weight) < 1:
            raise ValidationFailed(f"plan {name!r} has a limit below 1")
        plans[name] = plan
    if default not in plans:
        raise ValidationFailed(f"default plan {default!r} is not among the plans {sorted(plans)}")
    return plans
