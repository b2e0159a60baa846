"""The ARM template language (docs/reference/front-door.md#the-template-language), pure: no I/O, no FastAPI, no
SQLAlchemy.

``expressions`` parses ``[...]`` strings into trees; ``functions`` is the one table of template functions;
``evaluation`` evaluates trees against a scope (parameters, variables, copy indexes, the deployment's
environment and a lookup for ``reference()``/``list*()``); ``template`` reads a whole template with its
parameters into a plan (resources in dependency order) and evaluates resource bodies and outputs."""
