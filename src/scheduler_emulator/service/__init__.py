"""The service layer: job-collection and job operations with all their rules, called by every surface.

The ARM routers (``api/``), the classic 2014 surface (``api/classic/``) and the dashboard each parse their
own wire format, call these functions inside one store transaction, and render the rows they get back.
Errors are domain errors (``domain.errors``: FieldError, Conflict, NotFound, InvalidName, TooLarge); each
surface turns them into its own error shape.
"""
