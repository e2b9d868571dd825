/* placeholder: implemented in progress */
