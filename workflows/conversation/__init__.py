"""``SupportWorkflow`` (``workflow``): one durable customer conversation, its turn, approvals,
cancellation, compensation, execution of confirmed writes, journal and resolution."""
