//! File formats: the `.soul` archive, directory layouts and the JSON dump.
