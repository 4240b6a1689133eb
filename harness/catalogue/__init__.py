"""Working on the catalogue of entries: new (scaffold), check, export, bisect, message search.
May import every stage but cli/."""
