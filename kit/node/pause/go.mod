module veneer.local/pause

go 1.26
