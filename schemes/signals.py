"""What schemes tells the apps above it (DESIGN.md: a lower app never imports upward)."""

from django.dispatch import Signal

# Sent with `pair_id` and `events` (each SchemeEvent.as_dict()) once newly detected scheme
# events are committed: the live feed (streaming) publishes them to the pair's streams.
scheme_events_stored = Signal()
