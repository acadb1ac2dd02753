"""The journal: our own SQL store of the decision log (model calls and their verdicts) and
the transcript for humans (``store.JournalStore``), and the activity that writes a turn's
records (``activity.JournalActivities``)."""
