"""Reports for people: terminal tables, heatmaps, the HTML report."""
