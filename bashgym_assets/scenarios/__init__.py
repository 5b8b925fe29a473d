"""Scenario bundles: the model, the bundled pack, importers, teacher authoring and the reference gate."""
