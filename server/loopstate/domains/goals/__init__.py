"""The goals domain: todos and gates as an ordered event stream per goal,
with ACTIVE_GOAL_STATE.md as a rendered projection. Pure: no files, clock or ids."""

from loopstate.domains.goals.domain import GoalsDomain

DOMAIN = GoalsDomain()
