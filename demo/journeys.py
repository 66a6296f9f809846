"""The life the demo simulator plays: one journey as a list of steps with offsets, and when each shipment joins it.

Every simulated shipment follows JOURNEY, from its booking to the warehouse, in 25 minutes: the demo's
time runs as a time-lapse of a voyage. A new shipment is booked every ENTRY_EVERY seconds; when the simulator
starts, shipments join at every stage (CAST_PHASES), so that each step of the journey happens within its first
five minutes. What a shipment that joins halfway did before it joined is written at once, dated in the past at
HISTORY_SCALE (a voyage of weeks), so its timeline reads like a voyage's and its free-time clocks have run.
"""
from datetime import timedelta

# (seconds after booking, step, its argument): the ETA a step sets is in seconds after booking too. The steps
# that send events (validate, depart, the ETAs, arrive, discharge, deliver) fall at different seconds of
# ENTRY_EVERY, so that once the start is past a receiver hears of some shipment every 50 seconds at most.
JOURNEY = (
    (0, "book", 180),              # a draft, the carrier's booking, the first estimated arrival
    (45, "validate", None),        # the key facts confirmed
    (90, "depart", None),          # loaded and departed: in transit
    (135, "revise_eta", 480),      # the carrier's ETA slips...
    (200, "transship", None),      # arrives at the hub and is discharged there
    (240, "transship_depart", None),  # loaded on the second vessel, which departs
    (270, "revise_eta", 780),      # ...slips again (an eta_drift alert), then holds until the arrival
    (780, "arrive", None),         # arrived at the port of discharge, at the ETA: the alert resolves
    (825, "discharge", None),      # discharged: the demurrage clocks start; the receiving checks run
    (1230, "watch_free_time", None),  # a demurrage_risk alert when 2 or fewer free days are left
    (1290, "gate_out", None),      # out of the terminal: demurrage stops, its alert resolves
    (1495, "deliver", None),       # delivered to the warehouse: in_warehouse
)
# A new shipment is booked this often (seconds); no more than five are on the way at once.
ENTRY_EVERY = 300
# Where the shipments that join at the start stand in their journey (seconds after their booking): one per
# ENTRY_EVERY, so every step of the journey falls within some shipment's first ENTRY_EVERY seconds.
CAST_PHASES = tuple(range(0, JOURNEY[-1][0], ENTRY_EVERY))
# The past of a shipment that joins halfway: a second of the journey is half an hour of its voyage (booked
# 25 days, departed 23 days and discharged 8 days before the start, for the one that joins last).
HISTORY_SCALE = 1800


def member(shipment_id, entered, phase):
    """A shipment on its journey: its id, when it joined (the simulator's clock), where it stood then."""
    return {"shipment_id": shipment_id, "entered": entered, "phase": phase, "done": 0}


def moment(shipment, offset):
    """When the step `offset` seconds after booking happens: in the demo's time from the moment the shipment
    joined, HISTORY_SCALE times slower before it."""
    seconds = offset - shipment["phase"]
    return shipment["entered"] + timedelta(seconds=seconds if seconds >= 0 else seconds * HISTORY_SCALE)


def offset_of(name):
    """Seconds after booking of the journey's step `name` (its first, when it repeats)."""
    return next(offset for offset, step, _argument in JOURNEY if step == name)


def past_steps(phase):
    """The steps a shipment joining at `phase` has already made."""
    return [step for step in JOURNEY if step[0] < phase]


def due_steps(shipment, now):
    """The steps of `shipment` whose time has come and which it has not made yet, in order."""
    return [step for step in JOURNEY[shipment["done"]:] if moment(shipment, step[0]) <= now]


def finished(shipment):
    """Whether the shipment has made every step of its journey."""
    return shipment["done"] >= len(JOURNEY)
