// Placeholder: written in the pathkeeperd work (issue #5).
