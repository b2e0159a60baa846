"""The dispatcher: claims due jobs, fires their actions, records attempts and history."""
