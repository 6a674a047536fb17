"""Running days: the runner loop, Prefect flows and tasks, its temporary API, heartbeats, scheduling."""
