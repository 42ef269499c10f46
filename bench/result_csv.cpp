// placeholder: the result-CSV reader (yoco compare)
