"""The supervisors' inbox in the browser, served by the API: a page of the tenant's pending
approvals (``pages``), refreshed from a shared feed of approval changes (``feed``), behind a
signed browser session made by signing in once with an operator key (``sessions``), with
wording for people (``words``). Templates and static files sit beside the modules."""
