"""relin's typed configuration: one dataclass per component, one-to-one with ``params.yaml`` sections.

- :mod:`.loader`: the machinery (documented fields, strict building, the JSON schema, typed CLI values);
- one module per area: :mod:`.tracking`, :mod:`.data`, :mod:`.train`, :mod:`.teacher`, :mod:`.eval`,
  :mod:`.report` (the papers add theirs);
- :mod:`.params`: the root of ``params.yaml``, loading files and overlays, and :class:`~.params.Sections`.

This package imports none of them, so importing one area never makes a stage depend on the others.
``params.yaml`` is the default ("tiny") config; ``workflow/configs/*.yaml`` overlay it (deep merge).
The JSON schema in ``workflow/schemas/params.schema.yaml`` is generated from these classes
(``relin schema``). A variant (another model size, another schedule) is a named entry in a mapping
section, never a new flag.
"""
