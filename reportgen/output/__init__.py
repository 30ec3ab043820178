"""Where a site goes: written, folded, published, served.

`site.py` writes the site (pages, CSVs, assets), `transaction.py` puts it in place (`SiteTransaction`: a temporary
folder swapped in only when complete, one build per folder, never over a folder that is not reportgen's;
`PageWriter`: pages through the Jinja templates, CSVs and JSON; the bundled assets); `formatting.py` holds the
number filters the templates and the Markdown summary share; `single_file.py` folds a built site into one HTML
file; `publish.py` uploads a built site to Google Cloud Storage; `serve.py` serves one over http on this
machine; `web_types.py` gives each file its content type and caching for both.
"""
