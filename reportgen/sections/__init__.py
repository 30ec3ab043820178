"""Tool sections: one module per tool page (charts, CSVs, template data); `registry.SECTIONS` lists them."""
