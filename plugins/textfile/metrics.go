package main

import "github.com/plexporter/plexporter/sdk"

// The plugin's own families. node_exporter's textfile collector exposes
// node_textfile_mtime_seconds{file} and node_textfile_scrape_error; they
// are textfile_mtime_seconds and textfile_scrape_error here (README.md,
// "node_exporter's names", has the recording rules that restore them).
var (
	descMtime = sdk.NewDesc("textfile_mtime_seconds", sdk.Gauge,
		"Unix time of the last modification of each textfile whose samples are served or held, or that max_age dropped (node_textfile_mtime_seconds).", "file").WithUnit("seconds")
	descScrapeError = sdk.NewDesc("textfile_scrape_error", sdk.Gauge,
		"1 if a directory or file could not be read, was refused or conflicted with another in this scrape, 0 otherwise (node_textfile_scrape_error).")
	descCollectionErrors = sdk.NewDesc("textfile_collection_errors_total", sdk.Counter,
		"Failures reported to the host, by collector: directory (unreadable or unsafe), file (refused or unreadable), merge (a family or series refused for a conflict or a cap).", "collector")
	descFilesRefused = sdk.NewDesc("textfile_files_refused_total", sdk.Counter,
		"Files left out of a scrape, by reason: permissions, symlink, not_regular, size, parse, timestamp, max_age.", "reason")
	descSeriesRefused = sdk.NewDesc("textfile_series_refused_total", sdk.Counter,
		"Series of read files left out of a scrape, by reason: duplicate, conflict, reserved, unsupported, file_limit, total_limit.", "reason")
	descHeld = sdk.NewDesc("textfile_held_total", sdk.Counter,
		"Scrapes that served a file's last good parse because the file was incomplete (no trailing newline) or did not parse; once per bad version of a file.")
	descParses = sdk.NewDesc("textfile_parses_total", sdk.Counter,
		"Files read and parsed; a file is parsed again only when its size or mtime changes.")
	descSeries = sdk.NewDesc("textfile_series", sdk.Gauge,
		"Series served from the textfiles in this scrape.")
	// descFileFamilies stands for the families the files hold.
	descFileFamilies = sdk.NewDesc("*", sdk.Untyped, "The families the *.prom files in the configured directories hold, with their own types and help texts.")
)

// Collector names: the collector label of textfile_collection_errors_total
// and of the partial errors sent to the host.
const (
	collectorDirectory = "directory"
	collectorFile      = "file"
	collectorMerge     = "merge"
)

var errorCollectors = []string{collectorDirectory, collectorFile, collectorMerge}

// Reasons of textfile_files_refused_total.
const (
	fileRefusedPermissions = "permissions" // writable by others than the owner and the group
	fileRefusedSymlink     = "symlink"     // a link out of the directory, or a broken one
	fileRefusedNotRegular  = "not_regular" // a directory, FIFO, device or socket named *.prom
	fileRefusedSize        = "size"        // larger than max_file_bytes
	fileRefusedParse       = "parse"       // incomplete or unparsable, with no good parse to hold
	fileRefusedTimestamp   = "timestamp"   // a sample carries a timestamp
	fileRefusedMaxAge      = "max_age"     // mtime older than max_age
)

var fileReasons = []string{fileRefusedPermissions, fileRefusedSymlink, fileRefusedNotRegular, fileRefusedSize, fileRefusedParse, fileRefusedTimestamp, fileRefusedMaxAge}

// Reasons of textfile_series_refused_total.
const (
	seriesRefusedDuplicate   = "duplicate"   // the same series earlier in the same or another file
	seriesRefusedConflict    = "conflict"    // the family is already served with another type or help, or its series names are another family's
	seriesRefusedReserved    = "reserved"    // the family's name starts with a prefix the host keeps for itself
	seriesRefusedUnsupported = "unsupported" // an OpenMetrics type the exposition has no place for (info, stateset, gaugehistogram)
	seriesRefusedFileLimit   = "file_limit"  // past max_series_per_file
	seriesRefusedTotalLimit  = "total_limit" // past max_series
)

var seriesReasons = []string{seriesRefusedDuplicate, seriesRefusedConflict, seriesRefusedReserved, seriesRefusedUnsupported, seriesRefusedFileLimit, seriesRefusedTotalLimit}

var catalogue = []*sdk.Desc{
	descMtime, descScrapeError, descCollectionErrors, descFilesRefused, descSeriesRefused, descHeld, descParses, descSeries,
	descFileFamilies,
}
